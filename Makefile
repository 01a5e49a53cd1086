GO ?= go
PKGS := ./...

.PHONY: test race lint bench fuzz demo detect

# test: formatting, vet, and every test under the race detector.
test: lint
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

race: test

lint:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

FUZZTIME ?= 20s
fuzz:
	@for f in $$($(GO) test -list '^Fuzz' ./internal/wire | grep '^Fuzz'); do \
	  echo "== $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./internal/wire || exit 1; \
	done

demo:
	$(GO) run ./examples/demo

# detect: crash-to-everyone-knows latency over 50 seeds at 64 and 1,000
# members in the simulator (LAN defaults); about 20 minutes on 2 cores.
DETECT_SEEDS ?= 50
DETECT_SIZES ?= 64,1000
detect:
	$(GO) test -count=1 -timeout 2h -parallel 1 -run '^TestDetectionLatency$$' -v ./internal/sim -detect.seeds $(DETECT_SEEDS) -detect.sizes $(DETECT_SIZES)

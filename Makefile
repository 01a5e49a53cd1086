GO ?= go
PKGS := ./...

.PHONY: test race lint bench fuzz demo

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

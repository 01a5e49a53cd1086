// Command kv is a replicated last-writer-wins key-value store on a swim
// cluster, with a small HTTP front: writes spread as keyed broadcasts and
// the whole map rides on every push-pull (see Store). Start a few on one
// machine:
//
//	go run ./examples/kv -name a -port 7001 -http 127.0.0.1:8001
//	go run ./examples/kv -name b -port 7002 -http 127.0.0.1:8002 -join 127.0.0.1:7001
//	curl -X PUT -d hello 127.0.0.1:8001/kv/greeting
//	curl 127.0.0.1:8002/kv/greeting
//	curl 127.0.0.1:8002/kv
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/swim-go/swim"
)

func main() {
	name := flag.String("name", "", "member name (default: the host name)")
	port := flag.Int("port", swim.DefaultPort, "UDP and TCP port of the member")
	bind := flag.String("bind", "127.0.0.1", "address to bind")
	join := flag.String("join", "", "comma-separated seed addresses (host:port)")
	httpAddr := flag.String("http", "127.0.0.1:8000", "address of the HTTP front")
	flag.Parse()
	if err := run(*name, *bind, *port, *join, *httpAddr); err != nil {
		log.Fatal("kv: ", err)
	}
}

func run(name, bind string, port int, join, httpAddr string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := swim.DefaultLocalConfig()
	if name != "" {
		cfg.Name = name
	}
	cfg.BindAddr, cfg.BindPort = bind, port
	store := NewStore(cfg.Name)
	cfg.Messages, cfg.State = store, store
	ml, err := swim.New(cfg)
	if err != nil {
		return err
	}
	defer func() { _ = ml.Shutdown() }()
	store.Attach(ml)
	if join != "" {
		jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := ml.Join(jctx, strings.Split(join, ",")...)
		cancel()
		if err != nil {
			return err
		}
	}
	srv := &http.Server{Addr: httpAddr, Handler: handler(store), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ml.Leave(sctx)
		_ = srv.Shutdown(sctx)
	}()
	fmt.Printf("kv %s: member on %s, HTTP on %s\n", cfg.Name, ml.LocalMember().Addr, httpAddr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler serves GET /kv (the whole map), GET /kv/{key} and PUT /kv/{key}.
func handler(s *Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /kv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Snapshot())
	})
	mux.HandleFunc("GET /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.Get(r.PathValue("key"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = io.WriteString(w, v)
	})
	mux.HandleFunc("PUT /kv/{key}", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 400))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if err := s.Put(r.Context(), r.PathValue("key"), string(body)); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	return mux
}

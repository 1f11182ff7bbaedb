# pgdns — run `make help` for the targets.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
CONFIG   ?= configs/pgdns.yaml
FUZZ_TIME ?= 30s
DURATION ?= 30m
SEED     ?= 0
BENCH_ONLY ?=
PPROF    ?=

.DEFAULT_GOAL := help

.PHONY: help
help: ## show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-9s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: build
build: ## build bin/pgdns
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/pgdns ./cmd/pgdns

.PHONY: test
test: ## run every test: unit, fuzz seeds, and end-to-end against real PostgreSQL
	$(GO) vet ./...
	# pgdns itself (not its Linux-only bench, soak and tests) builds beyond Linux: type-checked for macOS
	GOOS=darwin $(GO) vet ./cmd/pgdns/ ./internal/app/ ./probe/ ./dnsserver/ ./httpapi/ ./zone/
	$(GO) test -race -count=1 -parallel 4 -timeout 20m ./...
	# what a host's goroutine costs in stack is a real build's, not the race detector's: again without -race
	$(GO) test -count=1 -run 'TestHostStack' ./probe/

.PHONY: test-unit
test-unit: ## run the unit tests and fuzz seeds only, no PostgreSQL (-short: end-to-end tests skip, except under CI=true)
	$(GO) vet ./...
	$(GO) test -race -short -count=1 ./...

.PHONY: image
image: ## build the container image pgdns:VERSION from the Dockerfile, its version stamped
	docker build --build-arg VERSION=$(VERSION) -t pgdns:$(VERSION) .

.PHONY: run
run: build ## run bin/pgdns with CONFIG (default configs/pgdns.yaml)
	./bin/pgdns -config $(CONFIG)

.PHONY: demo
demo: ## start a throwaway primary + 2 replicas and pgdns on them; Ctrl-C tears it all down (DEMO_FLAGS='-dns 127.0.0.1:53': pgdns on port 53, as root)
	$(GO) build -o bin/pgdns-demo ./internal/demo
	./bin/pgdns-demo $(DEMO_FLAGS)

.PHONY: demo-switchover
demo-switchover: ## from a second terminal: the running demo stops its primary, promotes a replica, re-points the other, re-clones the old primary as a replica
	pkill -USR1 -x pgdns-demo

.PHONY: bench
bench: build ## measure pgdns beside CoreDNS and a miekg/dns floor on a real cluster; writes BENCHMARKS.md (BENCH_ONLY=dns, failover, scale, dbcost, ha, hostile or srv: that section alone, ha as root; PPROF=dir: profiles of the scale step)
	./scripts/bench-deps.sh
	$(if $(BENCH_ONLY),,$(GO) test -run '^$$' -bench . -benchmem -count 1 ./zone ./dnsserver | grep -E '^(Benchmark|goos|goarch|cpu)' > bin/gobench.txt)
	$(GO) build -o bin/pgdns-bench ./cmd/pgdns-bench
	PATH="$$PATH:$$(go env GOPATH)/bin" ./bin/pgdns-bench -pgdns bin/pgdns -gobench bin/gobench.txt -out BENCHMARKS.md $(if $(BENCH_ONLY),-only $(BENCH_ONLY)) $(if $(PPROF),-pprof $(PPROF))

.PHONY: soak
soak: ## hunt wrong answers under seeded random faults for DURATION (default 30m); SEED=n replays a schedule, SHORT=1 plays each fault once, FOREIGN=0 lists no foreign host, OVERLAP=n faults at once (default 2), PARTITIONS=0 no packet drops (they need root), PLAIN_PROBE=1 pgdns probes without pg_monitor
	$(GO) build -o bin/pgdns-soak ./cmd/pgdns-soak
	./bin/pgdns-soak -duration $(DURATION) -seed $(SEED) $(if $(SHORT),-short) $(if $(filter 0,$(FOREIGN)),-foreign=false) $(if $(OVERLAP),-overlap $(OVERLAP)) $(if $(filter 0,$(PARTITIONS)),-partitions=false) $(if $(PLAIN_PROBE),-plain-probe) -pgdns-log bin/soak-pgdns.log

.PHONY: fuzz
fuzz: ## run each fuzz target for FUZZ_TIME (default 30s)
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_TIME) ./zone
	$(GO) test -run '^$$' -fuzz '^FuzzHandler$$' -fuzztime $(FUZZ_TIME) ./dnsserver
	$(GO) test -run '^$$' -fuzz '^FuzzParseHostPort$$' -fuzztime $(FUZZ_TIME) ./zone
	$(GO) test -run '^$$' -fuzz '^FuzzRedactKeepsNoPassword$$' -fuzztime $(FUZZ_TIME) ./zone

.PHONY: clean
clean: ## remove build output
	rm -rf bin

# dbregress: `make demo` sets everything up and runs the quickstart lab;
# `make test` runs every check. Both are safe to rerun.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
UV ?= $(shell command -v uv 2>/dev/null || echo "$(PYTHON) -m uv")
# Debian packages: the system PostgreSQL and MariaDB builds (with MyRocks), the peers the
# bench/ scripts compare with, and what old MariaDB jars need (libaio1 for mysqld,
# libncurses5 for their mysql client), headless Chromium with a font for the test
# that opens the HTML report as a reader would (tests/e2e/test_html_report.py), and
# valgrind and perf for `dbregress explain` (docs/metrics.md, "Explanations").
# What builds PostgreSQL from source (`postgres@src:PATH`, docs/engines.md): ccache, the
# compiler's helpers and the libraries configure looks for, and dpkg-dev for `apt-get
# source`, which fetches the Debian source tree the source-build tests use; cmake and
# g++, which the RocksDB and MySQL-family build tests run (tests/unit/test_rocksdb_src.py),
# and the compression libraries every `rocksdb@src:` build needs (Snappy, LZ4, ZSTD,
# bzip2; zlib above: source/rocksdb_build.py turns them all on), so that a user's own
# RocksDB checkout builds on a machine `make setup` made.
DEBIAN_PACKAGES := postgresql mariadb-server mariadb-plugin-rocksdb libaio1 libncurses5 sysbench rocksdb-tools librocksdb7.8 fio chromium fonts-dejavu-core valgrind linux-perf \
	dpkg-dev ccache bison flex libreadline-dev zlib1g-dev cmake g++ \
	libsnappy-dev liblz4-dev libzstd-dev libbz2-dev
QUICKSTART_BUILDS := rocksdb@7.10.2 rocksdb@10.2.1 postgres@12.20.0 postgres@17.2.0
# Debian's PostgreSQL source tree, unpacked here by `make sources` (apt-get source), with
# a link `postgresql-15` to it: the tree the source-build tests and labs/postgres-flavors
# build.
DEBIAN_SOURCES ?= /var/cache/dbregress/debian-src
PG_SOURCE_PACKAGE := postgresql-15
# apt's source lines: a copy of the system's first Debian entry (the release, not its
# security updates, whose sources the registry here does not serve) as `Types: deb-src`.
APT_SRC_LIST := /etc/apt/sources.list.d/dbregress-src.sources
# Debian's MariaDB 10.11 source tree and what its cmake build needs (the system's
# libraries for what MariaDB would otherwise download: PCRE2 and fmt): `make
# mariadb-source`, for bench/mariadb_src.py and `mariadb@src:` labs; not part of `make
# test` (a cold MariaDB build takes tens of minutes on 2 vCPUs).
MARIADB_SOURCE_PACKAGE := mariadb
MARIADB_BUILD_PACKAGES := cmake g++ libssl-dev libncurses-dev libpcre2-dev libfmt-dev \
	libaio-dev libsnappy-dev liblz4-dev libzstd-dev libbz2-dev
# (libaio-dev: InnoDB's native asynchronous IO, as MariaDB's and Debian's builds have it;
# the compression libraries: MyRocks, the `rel_myrocks` flavor.)
# What a MySQL 8.0 or 8.4 tree (and Percona Server's, FB MySQL's) needs to build with
# the MySQL options of source/cmake.py: `make mysql-source`. Debian packages no MySQL
# source: give a checkout or a release tarball yourself (docs/engines.md).
#   rpcsvc-proto  rpcgen, for Group Replication's XCom (cmake/rpc.cmake looks for it
#                 even when the plugin is left out, in some 8.0 releases)
#   libtirpc-dev  the RPC headers glibc no longer has (MySQL 8.0.11 release notes)
#   libudev-dev   the bundled libfido2 needs it on Linux (cmake/fido2.cmake)
#   pkg-config    cmake finds libtirpc with it (cmake/rpc.cmake)
MYSQL_BUILD_PACKAGES := cmake g++ make bison pkg-config rpcsvc-proto libtirpc-dev \
	libudev-dev libaio-dev libssl-dev libncurses-dev zlib1g-dev
# Debian's RocksDB source tree (7.8.3 on Debian 12), the compression libraries the
# registry's RocksDB libraries carry and clang (Debian's, 14: the `rel_clang_lto`
# flavor, clang with LTO as the seeds build RocksDB): `make rocksdb-source`, for
# `rocksdb@src:` labs and bench/rocksdb_src.py.
ROCKSDB_SOURCE_PACKAGE := rocksdb
ROCKSDB_BUILD_PACKAGES := cmake g++ clang libsnappy-dev liblz4-dev libzstd-dev libbz2-dev zlib1g-dev
# One spelling of each, so that what `make setup` builds is what `make test` reuses.
CLIPPY := cargo clippy --release --locked --all-targets --quiet -- -D warnings
CARGO_TEST := cargo test --release --locked --quiet

.PHONY: demo test unit install setup rust-targets uv python debian sources mariadb-source rocksdb-source mysql-source build tools builds schema lint rust-check pytest clean

demo: install builds
	$(UV) run dbregress run labs/quickstart.toml

test: setup lint rust-check pytest

# What running dbregress needs (a fleet host needs no more).
install: python debian sources build tools

# What testing it needs besides: the Rust test binaries and clippy's analysis, built once
# here so that `make test` on a set-up clone only runs them (a fresh clone spends about
# 4 minutes of 2 vCPUs on these builds).
setup: install rust-targets

rust-targets:
	$(CARGO_TEST) --no-run
	$(CLIPPY)

uv:
	@command -v uv >/dev/null 2>&1 || $(PYTHON) -m uv --version >/dev/null 2>&1 || \
		$(PYTHON) -m pip install --quiet uv

python: uv
	$(UV) sync --frozen --quiet

# Installs only what is missing, so a warm machine does not touch the network.
debian:
	@missing=""; for p in $(DEBIAN_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

# Debian's source package of PostgreSQL, unpacked once under $(DEBIAN_SOURCES).
sources: debian
	@if ! ls -d $(DEBIAN_SOURCES)/$(PG_SOURCE_PACKAGE)-*/configure >/dev/null 2>&1; then \
		if [ ! -f $(APT_SRC_LIST) ]; then \
			awk '/^$$/{exit} {sub(/^Types: deb$$/, "Types: deb-src"); print}' /etc/apt/sources.list.d/debian.sources > $(APT_SRC_LIST); \
			apt-get update -qq; \
		fi; \
		mkdir -p $(DEBIAN_SOURCES) && cd $(DEBIAN_SOURCES) && apt-get source -qq $(PG_SOURCE_PACKAGE) >/dev/null 2>&1 && \
		echo "unpacked $$(ls -d $(DEBIAN_SOURCES)/$(PG_SOURCE_PACKAGE)-*/)"; \
	fi
	@cd $(DEBIAN_SOURCES) && ln -sfn "$$(ls -d $(PG_SOURCE_PACKAGE)-*/ | sort -V | tail -1 | tr -d /)" $(PG_SOURCE_PACKAGE)

# A Debian source package unpacked under $(DEBIAN_SOURCES) with its build packages, and
# a link named after the package to its newest tree: $(call debian-source,PACKAGE,PACKAGES).
define debian-source
	@missing=""; for p in $(2); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get install -y -qq$$missing >/dev/null; fi
	@if ! ls -d $(DEBIAN_SOURCES)/$(1)-[0-9]*/CMakeLists.txt >/dev/null 2>&1; then \
		cd $(DEBIAN_SOURCES) && apt-get source -qq $(1) >/dev/null 2>&1 && \
		echo "unpacked $$(ls -d $(DEBIAN_SOURCES)/$(1)-[0-9]*/)"; \
	fi
	@cd $(DEBIAN_SOURCES) && ln -sfn "$$(ls -d $(1)-[0-9]*/ | sort -V | tail -1 | tr -d /)" $(1)
endef

mariadb-source: sources
	$(call debian-source,$(MARIADB_SOURCE_PACKAGE),$(MARIADB_BUILD_PACKAGES))

rocksdb-source: sources
	$(call debian-source,$(ROCKSDB_SOURCE_PACKAGE),$(ROCKSDB_BUILD_PACKAGES))

mysql-source: debian
	@missing=""; for p in $(MYSQL_BUILD_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then apt-get install -y -qq$$missing >/dev/null; fi
	@echo "MySQL-family build packages installed. Debian has no MySQL source: give a"
	@echo "checkout or tarball as mysql@src:/path[#REF][+FLAVOR]; an 8.0 tree without"
	@echo "boost/ needs WITH_BOOST=/path/to/boost_1_77_0 (docs/engines.md, Boost)."

build:
	cargo build --release --locked --quiet

# The flame graphs of `dbregress explain`: inferno's collapse, flamegraph and diff tools
# (a cargo install, once: skipped when they are on PATH).
tools:
	@command -v inferno-flamegraph >/dev/null 2>&1 || cargo install --locked --quiet inferno

# The step spec's JSON Schema is generated from the loadgen's spec types (loadgen/src/spec.rs);
# tests/unit/test_schema_fresh.py fails when the checked-in copy differs from what this writes.
schema: build
	./target/release/dbregress-loadgen --print-spec-schema > schema/step-spec.schema.json.tmp
	mv schema/step-spec.schema.json.tmp schema/step-spec.schema.json

builds: python
	$(UV) run dbregress fetch $(QUICKSTART_BUILDS)

lint: python
	$(UV) run ruff check src tests bench tools examples
	$(UV) run ruff format --check src tests bench tools examples
	$(UV) run mypy --strict src
	$(UV) run python tools/import_graph.py
	$(UV) run python tools/sizes.py

rust-check:
	cargo fmt --all --check
	$(CLIPPY)
	$(CARGO_TEST)

# Every test. Those marked `quiet` judge timed figures and run alone, after the rest;
# the rest run two at a time, a file's tests in one process (an engine test spends much
# of its time waiting for a server, a build or a valgrind replay of the other column, so
# two of them fill the two CPUs a small host has).
pytest: python build
	$(UV) run pytest -q -m "not quiet" -n 2 --dist loadfile
	$(UV) run pytest -q -m quiet

# The fast loop: every test that starts no database engine (tests/unit, and the e2e
# tests not marked `engine`), spread over every CPU by pytest-xdist.
unit: python build
	$(UV) run pytest -q -m "not engine" -n auto

clean:
	rm -rf target .venv .mypy_cache .ruff_cache .pytest_cache

# rdxfer — non-recursive build.  Out of tree in $(BUILD)/; V=1 shows commands.
#
#   make            build the tools          make check   deps + build + all tests
#   make test       the inner loop: the normal build's unit and CLI tests only
#   make check-stress  the CLI tests 5x beside a CPU hog: lists every flaky test
#   make demo       deps + build + a 1 GiB loopback transfer
#   make asan       ASan/UBSan build and unit + CLI tests in build-asan/
#   make install    PREFIX=/usr/local DESTDIR=  (uninstall likewise)
#   make bench      bench/stream.sh           make format  clang-format

# 0.2: wire protocol 2 (SPAKE2), which 0.1 does not speak
VERSION := 0.2.0
BUILD ?= build
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/vendor-completions

CC ?= cc
NPROC := $(shell nproc 2>/dev/null || echo 2)
OPT ?= -O2 -g
WERROR ?= -Werror
SAN ?=
CFLAGS ?= $(OPT)
PKGS := libzstd libcrypto libxxhash libibverbs librdmacm libcurl expat libarchive
ALL_CFLAGS := -std=gnu11 -Wall -Wextra $(WERROR) -Wshadow -Wno-missing-field-initializers \
	-Isrc -D_GNU_SOURCE -DRDX_VERSION='"$(VERSION)"' -pthread $(SAN) $(CFLAGS) \
	$(shell pkg-config --cflags $(PKGS) 2>/dev/null)
LDLIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lzstd -lcrypto -lxxhash -libverbs -lrdmacm -lcurl -lexpat -larchive) -pthread
# S3 over RDMA's DC provider (src/s3/rdma_dc.c) where rdma-core has mlx5dv.
ifneq ($(wildcard /usr/include/infiniband/mlx5dv.h),)
ALL_CFLAGS += -DRDX_HAVE_MLX5DV
LDLIBS += -lmlx5
endif
ALL_LDFLAGS := $(SAN) $(LDFLAGS)

ifeq ($(V),1)
Q :=
else
Q := @
endif

# The layers, each a folder (README "Layout"): the streaming core with its
# verbs transport and trees, which knows nothing of S3 or SSH; the S3
# library with its server; rdcp's SSH side; the commands.
CORE_SRC := $(wildcard src/core/*.c src/core/*/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
S3_SRC := $(wildcard src/s3/*.c src/s3/*/*.c)
S3_OBJ := $(S3_SRC:%.c=$(BUILD)/%.o)
CLI_OBJ := $(BUILD)/src/cmd/cli.o $(BUILD)/src/cmd/opt.o
# rdcp's own modules (SSH through libssh), linked into rdcp only.
CP_SRC := $(wildcard src/cp/*.c)
CP_OBJ := $(CP_SRC:%.c=$(BUILD)/%.o)
CP_LIB := $(BUILD)/librdxcp.a
# rdpipe's own modules: a segment where it runs, and the plan.
PIPE_SRC := $(wildcard src/pipe/*.c)
PIPE_OBJ := $(PIPE_SRC:%.c=$(BUILD)/%.o)
SSH_CFLAGS := $(shell pkg-config --cflags libssh 2>/dev/null)
SSH_LIBS := $(shell pkg-config --libs libssh 2>/dev/null || echo -lssh)
TOOLS := rdsend rdrecv rdx-diag rdcp rds3 rdpipe
TOOL_BIN := $(TOOLS:%=$(BUILD)/%)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
PEER_BIN := $(BUILD)/tests/badpeer $(BUILD)/tests/evilpeer $(BUILD)/tests/verbspeer $(BUILD)/tests/shim.so \
	$(BUILD)/tests/s3rdmapeer
LIB := $(BUILD)/librdx.a
S3LIB := $(BUILD)/librdxs3.a
# libFuzzer targets for the decoders of everything a peer sends (clang only).
CLANG ?= clang
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_CORE := src/core/proto.c src/core/err.c src/core/zpack.c src/core/seal.c src/s3/xml.c \
	$(wildcard src/core/tree/*.c) src/core/io.c src/core/log.c src/core/fileio.c src/core/units.c \
	src/core/hex.c src/s3/serve/serve_http.c src/s3/buf.c src/s3/sigv4.c src/s3/rdma_token.c \
	src/s3/serve/aws_chunked.c src/s3/checksum.c src/core/direct.c

.PHONY: all check test check-stress demo asan fuzz install uninstall format clean bench deps completions
all: $(TOOL_BIN) $(UNIT_BIN) $(PEER_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(LIB): $(CORE_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(S3LIB): $(S3_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/%: $(BUILD)/src/cmd/%.o $(CLI_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/src/cp/%.o: src/cp/%.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(SSH_CFLAGS) -MMD -MP -c -o $@ $<

# rds3's commands, and the S3 options rds3 and rdcp share (s3opts.c).
S3OPTS_OBJ := $(BUILD)/src/cmd/s3opts.o
S3CMD_OBJ := $(BUILD)/src/cmd/s3cmd.o $(S3OPTS_OBJ)
$(BUILD)/rds3: $(BUILD)/src/cmd/rds3.o $(S3CMD_OBJ) $(CLI_OBJ) $(S3LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/rdcp: $(BUILD)/src/cmd/rdcp.o $(S3OPTS_OBJ) $(CP_OBJ) $(CLI_OBJ) $(S3LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SSH_LIBS) $(LDLIBS)

$(CP_LIB): $(CP_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/rdpipe: $(BUILD)/src/cmd/rdpipe.o $(PIPE_OBJ) $(CP_LIB) $(CLI_OBJ) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(SSH_LIBS) $(LDLIBS)

$(BUILD)/src/cmd/rdpipe.o: src/cmd/rdpipe.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(SSH_CFLAGS) -MMD -MP -c -o $@ $<

# rdpipe's plan is pure (addresses parsed as rdcp's are).
$(BUILD)/tests/unit/test_pipe: $(BUILD)/tests/unit/test_pipe.o $(BUILD)/src/pipe/plan.o \
		$(BUILD)/src/cp/addr.o $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

# rdcp's pure modules (addresses, quoting, ssh_config) need no libssh.
$(BUILD)/tests/unit/test_cp: $(BUILD)/tests/unit/test_cp.o $(BUILD)/src/cp/addr.o \
		$(BUILD)/src/cp/shquote.o $(BUILD)/src/cp/sshcfg.o $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/unit/%: $(BUILD)/tests/unit/%.o $(S3LIB) $(LIB)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LDLIBS)

# The hand-made peers share peer.c, and of src/ only SPAKE2 (pake.c).
PEER_HS := tests/peer/peer.c src/core/pake.c

$(BUILD)/tests/badpeer: tests/peer/badpeer.c $(PEER_HS) tests/peer/peer.h src/core/pake.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(PEER_HS) $(LDLIBS)

# A hostile sender of tree streams (libarchive, libcrypto, xxhash).
$(BUILD)/tests/evilpeer: tests/peer/evilpeer.c $(PEER_HS) tests/peer/peer.h src/core/pake.h
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(PEER_HS) $(LDLIBS)

# Not sanitized: it is preloaded into binaries that may not be.
$(BUILD)/tests/shim.so: tests/peer/shim.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) -std=gnu11 -Wall -Wextra $(WERROR) -O2 -fPIC -shared -o $@ $< -ldl

$(BUILD)/tests/verbspeer: tests/peer/verbspeer.c $(LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(LIB) $(LDLIBS)

$(BUILD)/tests/s3rdmapeer: tests/peer/s3rdmapeer.c $(S3LIB) $(LIB)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(S3LIB) $(LIB) $(LDLIBS)

# The targets share one set of objects of the code under test.
FUZZ_CFLAGS = -std=gnu11 -Isrc -D_GNU_SOURCE -g -O1 -Wall -Wextra $(WERROR)
FUZZ_OBJ := $(FUZZ_CORE:%.c=$(BUILD)/fuzz/obj/%.o)

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(@D)
	@$(if $(Q),echo "  CLANG   $<")
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,address,undefined -MMD -MP -c -o $@ $<

$(BUILD)/fuzz/%: tests/fuzz/%.c $(FUZZ_OBJ)
	@mkdir -p $(@D)
	@$(if $(Q),echo "  FUZZ    $@")
	$(Q)$(CLANG) $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined -MMD -MP -o $@ $< $(FUZZ_OBJ) $(LDLIBS)

fuzz: $(FUZZ_BIN)

deps:
	@scripts/deps.sh test

# The one test command: installs what is missing, builds, runs every test
# (unit + CLI on the normal build, unit + CLI transfers under ASan/UBSan,
# unit + transfers and trees under ThreadSanitizer,
# the verbs transport on Soft-RoCE in QEMU guests: docs/RXE-VM.md), and
# ends with "N passed, N failed".
check: deps
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) all fuzz
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-asan OPT='-O1 -g -fno-omit-frame-pointer' \
		SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined' all
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) BUILD=build-tsan OPT='-O1 -g' SAN='-fsanitize=thread' all
	$(Q)RDX_BUILD=$(BUILD) RDX_ASAN_BUILD=build-asan RDX_TSAN_BUILD=build-tsan \
		RDX_FUZZ_BUILD=$(BUILD)/fuzz RDX_RXE=1 bash tests/run.sh

# The inner loop while working on the code: no sanitizer builds, fuzz
# targets or Soft-RoCE guest (make check runs those too).
test: deps
	$(Q)$(MAKE) --no-print-directory -j$(NPROC) all
	$(Q)RDX_BUILD=$(BUILD) bash tests/run.sh

# The flake hunt, not part of check: the normal build's unit and CLI tests
# five times over at RDX_JOBS=4 beside a CPU hog; lists every test that
# failed even once (tests/stress.sh).
check-stress: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)RDX_BUILD=$(BUILD) bash tests/stress.sh

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan OPT='-O1 -g -fno-omit-frame-pointer' \
		SAN='-fsanitize=address,undefined -fno-sanitize-recover=undefined' all
	$(Q)RDX_BUILD=build-asan RDX_SANITIZED=1 bash tests/run.sh

demo:
	@scripts/deps.sh build
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bash scripts/demo.sh $(BUILD)

bench:
	@scripts/deps.sh bench
	$(Q)$(MAKE) --no-print-directory all
	$(Q)bash bench/stream.sh

# Completions are generated from each tool's option table; the committed
# copies are checked against the binaries by tests/cli/options.bats.
completions: $(TOOL_BIN)
	$(Q)for t in $(TOOLS); do \
		$(BUILD)/$$t --completion bash > completions/$$t.bash && \
		$(BUILD)/$$t --completion zsh > completions/_$$t; done

install: $(TOOL_BIN)
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR)
	install -m 755 $(TOOL_BIN) $(DESTDIR)$(BINDIR)/
	install -m 644 $(TOOLS:%=man/%.1) $(DESTDIR)$(MANDIR)/man1/
	for t in $(TOOLS); do \
		install -m 644 completions/$$t.bash $(DESTDIR)$(BASHCOMPDIR)/$$t && \
		install -m 644 completions/_$$t $(DESTDIR)$(ZSHCOMPDIR)/_$$t; done

uninstall:
	for t in $(TOOLS); do \
		rm -f $(DESTDIR)$(BINDIR)/$$t $(DESTDIR)$(MANDIR)/man1/$$t.1 \
		      $(DESTDIR)$(BASHCOMPDIR)/$$t $(DESTDIR)$(ZSHCOMPDIR)/_$$t; done

format:
	clang-format -i --style=file src/*/*.[ch] src/*/*/*.[ch] tests/unit/*.[ch] tests/peer/*.c

clean:
	rm -rf build build-asan build-tsan

.SECONDARY:
-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

/* The receiving side of a transfer.
 *
 *   main thread        listens; authenticates one sender (strays and wrong
 *                      keys are logged and ignored); only then creates the
 *                      output; accepts the sender's extra streams; then
 *                      keepalives, progress, signals
 *   stream threads     one per connection: header, claim the chunk's slot,
 *                      payload straight into it, open, decompress, publish;
 *                      stream 0 also carries EOS
 *   writer threads     take chunks in order (offset, hash), write them
 *                      (in parallel at their offsets for files), release
 *   at the end         totals and hash against EOS, then commit (rename)
 *                      and only then DONE to the sender
 */
#include "core/recv_int.h"

#include <fcntl.h>

static struct receiver *receiver_of(struct rdx_session *s)
{
	return (struct receiver *)s;
}

static void signal_main(struct rdx_session *s)
{
	pthread_mutex_lock(&s->lock);
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* Checks a DATA header against what was negotiated. */
static bool data_hdr_ok(const struct rdx_session *s,
			const struct rdx_frame_hdr *h)
{
	bool sealed = h->flags & RDX_FL_SEALED;
	bool packed = h->flags & RDX_FL_COMPRESSED;
	uint32_t body = h->len - (sealed ? RDX_TAG_LEN : 0);

	if (sealed != s->encrypt || (packed && !s->opts.compress))
		return false;
	if (h->plain_len == 0 || h->plain_len > s->opts.slot_size)
		return false;
	if (sealed && h->len < RDX_TAG_LEN)
		return false;
	if (!packed && body != h->plain_len)
		return false;
	return body > 0;
}

struct stream_ctx {
	struct rdx_zpack *z;
	struct rdx_seal *seal;
	uint8_t scratch[RDX_CTRL_MAX + RDX_TAG_LEN];
};

/* Receives one DATA payload into its slot and publishes the plain chunk. */
static int recv_data(struct rdx_stream *st, struct stream_ctx *c,
		     const struct rdx_frame_hdr *h, const uint8_t raw[RDX_HDR_LEN],
		     uint32_t *pending)
{
	struct rdx_session *s = st->s;
	struct rdx_conn *conn = st->conn;
	struct rdx_slot *slot;
	bool sealed = h->flags & RDX_FL_SEALED;
	bool packed = h->flags & RDX_FL_COMPRESSED;
	uint8_t *land;
	size_t body = h->len - (sealed ? RDX_TAG_LEN : 0);
	int ret;

	ret = rdx_ring_claim(s->ring, h->seq, &slot);
	if (ret == -RDX_EPROTO)
		return sess_fail(s, ret, "sender sent chunk %llu twice or past the end",
				 (unsigned long long)h->seq);
	if (ret == -RDX_ETIMEOUT)
		return sess_fail(s, ret, "output stalled for %.0f s (--timeout)",
				 (double)s->o->timeout_ms / 1000);
	if (ret)
		return ret;
	land = (sealed || packed) ? slot->wire : slot->data;
	ret = conn->ops->recv(conn, land, h->len);
	*pending = 0;
	if (ret) {
		rdx_ring_unclaim(s->ring, slot);
		return sess_fail_conn(s, conn, ret, "lost the connection to the sender");
	}
	if (sealed) {
		ret = rdx_open(c->seal, RDX_SEAL_DATA, h->seq, raw, RDX_HDR_LEN,
			       slot->wire, h->len, packed ? slot->wire : slot->data);
		if (ret) {
			rdx_ring_unclaim(s->ring, slot);
			return sess_fail(s, -RDX_EINTEGRITY,
					 "chunk %llu failed authentication (corrupted or forged)",
					 (unsigned long long)h->seq);
		}
	}
	if (packed) {
		ret = rdx_zpack_decompress(c->z, slot->wire, body, slot->data,
					   h->plain_len);
		if (ret) {
			rdx_ring_unclaim(s->ring, slot);
			return sess_fail(s, ret, "chunk %llu does not decompress",
					 (unsigned long long)h->seq);
		}
	}
	slot->len = h->plain_len;
	rdx_ring_publish(s->ring, slot);
	return 0;
}

static int recv_eos(struct rdx_stream *st, const struct rdx_frame_hdr *h,
		    const uint8_t raw[RDX_HDR_LEN], struct stream_ctx *c)
{
	struct rdx_session *s = st->s;
	struct receiver *x = receiver_of(s);
	struct rdx_eos eos;
	int ret;

	ret = st->conn->ops->recv(st->conn, c->scratch, h->len);
	if (ret)
		return sess_fail_conn(s, st->conn, ret, "lost the connection to the sender");
	if (s->encrypt) {
		if (!(h->flags & RDX_FL_SEALED) || h->seq != s->ctrl_rx_seq ||
		    rdx_open(s->ctrl_rx, RDX_SEAL_CTRL, h->seq, raw, RDX_HDR_LEN,
			     c->scratch, h->len, c->scratch))
			return sess_fail(s, -RDX_EINTEGRITY,
					 "end-of-stream message failed authentication");
		s->ctrl_rx_seq++;
	}
	if (rdx_eos_decode(c->scratch, h->len - (s->encrypt ? RDX_TAG_LEN : 0), &eos))
		return sess_fail(s, -RDX_EPROTO, "sender sent a bad end-of-stream message");
	/* Recorded before the ring learns the end: the writers may finish
	 * the moment it does, and the main thread then reads x->eos. */
	pthread_mutex_lock(&s->lock);
	x->eos = eos;
	x->eos_seen = true;
	pthread_mutex_unlock(&s->lock);
	if (rdx_ring_set_end(s->ring, eos.nchunks))
		return sess_fail(s, -RDX_EPROTO, "sender sent a bad end-of-stream message");
	return 1;
}

/* Reads and drops n payload bytes.  Returns 0 or the transport's error. */
static int skip(struct rdx_conn *conn, struct stream_ctx *c, uint32_t n)
{
	while (n) {
		uint32_t k = n < sizeof(c->scratch) ? n : sizeof(c->scratch);
		int ret = conn->ops->recv(conn, c->scratch, k);

		if (ret)
			return ret;
		n -= k;
	}
	return 0;
}

/* After a failure, keep reading (and dropping) until the sender hangs up:
 * closing with unread data would reset the connection and could destroy
 * the ERROR frame that tells the sender why.  pending is what is left of
 * the frame the stream stopped in.  An ERROR from the sender still counts:
 * it explains a broken connection better than "connection reset". */
static void drain(struct rdx_stream *st, struct stream_ctx *c, uint32_t pending)
{
	struct rdx_conn *conn = st->conn;
	uint8_t raw[RDX_HDR_LEN];

	if (skip(conn, c, pending))
		return;
	for (;;) {
		struct rdx_frame_hdr h;

		if (conn->ops->recv(conn, raw, sizeof(raw)) ||
		    rdx_hdr_decode(raw, st->s->data_max, &h))
			return;
		if (h.type == RDX_F_ERROR) {
			if (conn->ops->recv(conn, c->scratch, h.len) == 0)
				sess_peer_error(st->s, c->scratch, h.len);
			return;
		}
		if (skip(conn, c, h.len))
			return;
	}
}

/* Receives frames until EOS (stream 0), a clean end (other streams) or a
 * failure; *pending is left with the unread payload bytes of the frame it
 * stopped in. */
static void stream_loop(struct rdx_stream *st, struct stream_ctx *c,
			uint32_t *pending)
{
	struct rdx_session *s = st->s;
	uint64_t next_seq = 0; /* seqs on one stream only increase */
	uint8_t raw[RDX_HDR_LEN];
	int ret;

	for (;;) {
		struct rdx_frame_hdr h;

		ret = st->conn->ops->recv(st->conn, raw, sizeof(raw));
		if (ret == RDX_XPORT_EOF && st->index > 0)
			return;
		if (ret == RDX_XPORT_EOF) {
			sess_fail(s, -RDX_ECONNECT,
				  "sender closed the connection before the end of the stream");
			return;
		}
		if (ret) {
			sess_fail_conn(s, st->conn, ret, "lost the connection to the sender");
			return;
		}
		if (rdx_hdr_decode(raw, s->data_max, &h) || h.stream != st->index) {
			sess_fail(s, -RDX_EPROTO, "sender sent a malformed frame");
			return;
		}
		*pending = h.len;
		switch (h.type) {
		case RDX_F_KEEPALIVE:
			continue;
		case RDX_F_ERROR:
			*pending = 0;
			ret = st->conn->ops->recv(st->conn, c->scratch, h.len);
			if (ret)
				sess_fail_conn(s, st->conn, ret, "lost the connection to the sender");
			else
				sess_peer_error(s, c->scratch, h.len);
			return;
		case RDX_F_DATA:
			if (!data_hdr_ok(s, &h) || h.seq < next_seq) {
				sess_fail(s, -RDX_EPROTO, "sender sent a malformed data frame");
				return;
			}
			next_seq = h.seq + 1;
			if (recv_data(st, c, &h, raw, pending))
				return;
			continue;
		case RDX_F_EOS:
			if (st->index == 0) {
				*pending = 0;
				recv_eos(st, &h, raw, c);
				return;
			}
			/* fallthrough */
		default:
			sess_fail(s, -RDX_EPROTO, "sender sent an unexpected frame (type %u)",
				  h.type);
			return;
		}
	}
}

static void *stream_main(void *arg)
{
	struct rdx_stream *st = arg;
	struct rdx_session *s = st->s;
	struct stream_ctx *c = calloc(1, sizeof(*c));
	uint32_t pending = 0;
	int ret = c ? 0 : -ENOMEM;

	rdx_thread_name("rdx-recv%u", st->index);
	if (!ret && s->opts.compress)
		ret = rdx_zpack_new(&c->z, 0);
	if (!ret && s->encrypt)
		ret = rdx_seal_new(&c->seal, s->key_rx);
	if (ret)
		sess_fail(s, ret, "cannot set up stream: %s", rdx_strerror(ret));
	else
		stream_loop(st, c, &pending);
	if (c && sess_error(s))
		drain(st, c, pending);
	if (c) {
		rdx_zpack_free(c->z);
		rdx_seal_free(c->seal);
		free(c);
	}
	if (atomic_fetch_add(&receiver_of(s)->streams_done, 1) + 1 == s->nstreams)
		rdx_ring_close_producers(s->ring);
	signal_main(s);
	return NULL;
}

/* In order, under the ring lock: offsets, bounds and the end-to-end hash. */
static int order_hook(void *arg, struct rdx_slot *slot)
{
	struct rdx_session *s = arg;

	if ((s->opts.flags & RDX_OPT_SIZE_KNOWN) &&
	    s->total + slot->len > s->opts.size)
		return -EOVERFLOW; /* reported by writer_main, outside the lock */
	slot->offset = s->total;
	s->total += slot->len;
	rdx_hash_update(s->hash, slot->data, slot->len);
	return 0;
}

static int finish(struct receiver *x);

/* Ends a tree's extraction: ends its input, waits for the unpacker and
 * records why it failed.  Called by the (single) writer, or at the end. */
static int end_tree(struct receiver *x, bool ok)
{
	struct rdx_session *s = &x->s;
	char why[256];
	struct rdx_tree_counts n;
	int ret;

	rdx_sink_close(x->sink);
	x->sink = NULL;
	ret = rdx_tree_unpack_finish(x->tree, ok, why, sizeof(why), &n);
	if (!ret)
		rdx_info(1, "tree: %llu files and links, %llu bytes of file data",
			 (unsigned long long)n.files, (unsigned long long)n.bytes);
	x->tree = NULL;
	if (ret && ret != -ECANCELED)
		return sess_fail(s, ret, "%s", why);
	return ret;
}

/* --resume: records how much of the partial is complete from its start
 * (the chunks written without a gap), every RESUME_MARK_NS while data
 * arrives (what a SIGKILL can lose), or now when at_end.  A record behind
 * the data only costs a resend; one ahead of it (the disk lost what the
 * page cache had) is caught by the hash compared before resuming. */
#define RESUME_MARK_NS 500000000ull
static void mark_partial(struct receiver *x, bool at_end)
{
	struct rdx_session *s = &x->s;
	uint64_t done, have, now = rdx_now_ns();

	if (at_end)
		pthread_mutex_lock(&x->mark_lock);
	else if (now - atomic_load(&x->marked_ns) < RESUME_MARK_NS ||
		 pthread_mutex_trylock(&x->mark_lock))
		return; /* most slots: not yet time, no lock taken */
	done = s->ring ? rdx_ring_released_below(s->ring) * s->opts.slot_size : 0;
	if (done > s->opts.size)
		done = s->opts.size;
	have = x->start + done;
	if (have > x->marked && (at_end || now - atomic_load(&x->marked_ns) >= RESUME_MARK_NS) &&
	    rdx_sink_mark(x->sink, have) == 0) {
		x->marked = have;
		atomic_store(&x->marked_ns, now);
	}
	pthread_mutex_unlock(&x->mark_lock);
}

static void *writer_main(void *arg)
{
	struct receiver *x = arg;
	struct rdx_session *s = &x->s;
	struct rdx_slot *slot;
	int ret;

	rdx_thread_name("rdx-write");
	while ((ret = rdx_ring_take(s->ring, order_hook, s, &slot)) == 1) {
		ret = rdx_sink_write(x->sink, slot->data, slot->len, slot->offset);
		if (ret) {
			/* An unpacker that stopped reading says why itself;
			 * one that read a whole tree got data after it. */
			if (x->tree && ret == -EPIPE) {
				if (end_tree(x, false) == 0)
					sess_fail(s, -RDX_EPROTO, "sender sent data after the end of the tree");
			} else if (ret != -ECANCELED)
				sess_fail(s, -RDX_ELOCAL, "cannot write '%s': %s",
					  rdx_sink_name(x->sink), rdx_strerror(ret));
			break;
		}
		atomic_fetch_add(&s->moved, slot->len);
		rdx_ring_release(s->ring, slot);
		sess_grant(s);
		if (x->partial)
			mark_partial(x, false);
	}
	if (ret == -ENODATA)
		sess_fail(s, -RDX_EPROTO, "sender ended the streams with data missing");
	if (ret == -EOVERFLOW)
		sess_fail(s, -RDX_EPROTO, "sender sent more data than it announced");
	/* The last writer checks and commits the file (fsync can take long),
	 * while the main thread goes on sending keepalives. */
	if (atomic_fetch_add(&x->writers_done, 1) + 1 == x->nwriters &&
	    !sess_error(s) && finish(x) == 0) {
		pthread_mutex_lock(&s->lock);
		x->committed = true;
		pthread_mutex_unlock(&s->lock);
	}
	signal_main(s);
	return NULL;
}

/* The file or stdout as the sink. */
static int open_file(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	struct rdx_wneed need;
	struct rdx_wplan plan;
	char why[256];
	int ret;

	if (o->fd > 0) {
		int fd = fcntl(o->fd, F_DUPFD_CLOEXEC, 3);
		const char *name = o->fd_name ? o->fd_name : "the output";

		ret = fd < 0 ? -errno : rdx_sink_open_fd(&x->sink, fd, name, &s->stop);
		if (ret && fd >= 0)
			close(fd);
		if (ret)
			return sess_fail(s, -RDX_ELOCAL, "cannot write %s: %s", name,
					 rdx_strerror(ret));
		return 0;
	}
	need = (struct rdx_wneed){ .policy = o->direct,
				   .size_known = s->opts.flags & RDX_OPT_SIZE_KNOWN,
				   .size = s->opts.size,
				   .avail = rdx_mem_available(),
				   .fsync = o->fsync };
	plan = rdx_wplan_choose(&need);
	ret = -ENOTSUP;
	if (s->opts.flags & RDX_OPT_RESUME) {
		ret = rdx_sink_open_partial(&x->sink, o->path, &plan, &s->stop, &x->have);
		x->partial = !ret;
	}
	if (ret == -ENOTSUP) /* stdout, a device: nothing to resume */
		ret = rdx_sink_open(&x->sink, o->path, s->opts.flags & RDX_OPT_SIZE_KNOWN,
				    s->opts.size, &plan, &s->stop, o->timeout_ms / 2,
				    o->interrupted);
	if (!ret && (o->new_mode & RDX_NEW_MODE_SET))
		ret = rdx_sink_new_mode(x->sink, o->new_mode & 0777);
	if (ret == -EINTR)
		return sess_fail(s, -RDX_EINTR, "interrupted");
	if (ret == -ENXIO)
		return sess_fail(s, -RDX_ELOCAL,
				 "cannot write '%s': no reader on the fifo within %.0f s",
				 o->path, (double)o->timeout_ms / 2000);
	if (ret)
		return sess_fail(s, -RDX_ELOCAL, "cannot create '%s': %s",
				 o->path ? o->path : "standard output",
				 rdx_strerror(ret));
	if (rdx_sink_parallel(x->sink))
		rdx_info(1, "writing '%s': %s", o->path,
			 rdx_wplan_say(&plan, &need, why, sizeof(why)));
	return 0;
}

/* --sync: our files under the sender's top-level names, in LIST frames;
 * after every RDX_LIST_WINDOW of them we wait for the sender's LIST_ACK. */
struct list_out {
	struct rdx_session *s;
	uint8_t buf[RDX_LIST_MAX];
	size_t used;
	unsigned frames;
};

static int list_flush(struct list_out *l)
{
	struct rdx_session *s = l->s;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	struct rdx_frame_hdr h;
	struct rdx_errmsg em;
	int ret;

	if (!l->used)
		return 0;
	ret = sess_send_ctrl(s, RDX_F_LIST, l->buf, l->used);
	l->used = 0;
	if (ret || ++l->frames % RDX_LIST_WINDOW)
		return ret;
	ret = sess_recv_ctrl(s, s->streams[0].conn, &h, buf, s->encrypt, &em);
	if (ret == -RDX_EREMOTE)
		return sess_peer_failure(s, &em);
	if (!ret && (h.type != RDX_F_LIST_ACK || h.len))
		return sess_fail(s, -RDX_EPROTO, "sender sent an unexpected message");
	return ret;
}

static int list_emit(void *arg, const struct rdx_list_entry *e)
{
	struct list_out *l = arg;
	int ret;

	if (rdx_list_encode(e, l->buf, sizeof(l->buf), &l->used))
		return 0;
	ret = list_flush(l);
	if (!ret && !rdx_list_encode(e, l->buf, sizeof(l->buf), &l->used))
		ret = -RDX_EPROTO; /* cannot happen: names are bounded */
	return ret;
}

static int serve_list(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	struct rdx_conn *c = s->streams[0].conn;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	struct list_out *l = calloc(1, sizeof(*l));
	struct sess_busy busy;
	struct rdx_frame_hdr h;
	struct rdx_errmsg em;
	uint8_t key[RDX_LIST_KEY_LEN];
	bool hashed = s->opts.flags & RDX_OPT_CHECKSUM;
	size_t off = 0;
	int ret;

	if (!l)
		return sess_fail(s, -ENOMEM, "out of memory");
	l->s = s;
	if (hashed && sess_list_key(s, key)) {
		ret = sess_error(s);
		goto out;
	}
	ret = sess_recv_ctrl(s, c, &h, buf, s->encrypt, &em);
	if (ret == -RDX_EREMOTE) {
		ret = sess_peer_failure(s, &em);
		goto out;
	}
	if (ret) {
		ret = sess_fail_conn(s, c, ret, "lost the connection to the sender");
		goto out;
	}
	if (h.type != RDX_F_LIST_REQ || (h.len && buf[h.len - 1] != '\0')) {
		ret = sess_fail(s, -RDX_EPROTO, "sender sent a malformed listing request");
		goto out;
	}
	/* NUL-terminated top-level names, one tree each; with --checksum
	 * every file is read, which can take longer than --timeout. */
	sess_busy_begin(s, &busy);
	while (!ret && off < h.len) {
		const char *top = (const char *)buf + off;

		off += strlen(top) + 1;
		ret = rdx_tree_unpack_list(x->tree, top, hashed ? key : NULL, list_emit, l);
		if (ret == -RDX_EPROTO)
			ret = sess_fail(s, ret, "sender asked to list a name that was not asked for: '%s'",
					top);
	}
	if (!ret)
		ret = list_flush(l);
	sess_busy_end(&busy);
	if (!ret)
		ret = sess_send_ctrl(s, RDX_F_LIST_END, buf, 0);
	if (ret && !sess_error(s))
		ret = sess_fail_conn(s, c, ret, "lost the connection to the sender");
out:
	explicit_bzero(key, sizeof(key));
	free(l);
	return ret;
}

static int tree_feed(void *arg, const void *buf, size_t len)
{
	return rdx_tree_unpack_feed(arg, buf, len);
}

static void tree_end(void *arg)
{
	rdx_tree_unpack_end_feed(arg);
}

/* -r: the unpacker, fed the slots in place (no pipe) as the sink. */
static int open_tree(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	const char *dst = s->o->path ? s->o->path : ".";
	int ret;

	ret = rdx_tree_unpack_start(&x->tree, dst, &(struct rdx_tree_unpack_opts){
		.as_root = geteuid() == 0,
		.writers = s->o->io_threads,
		.tops = s->o->tree_tops,
		.ntops = s->o->ntree_tops,
		.files_only = s->o->tree_files_only,
		.tops_glob = s->o->tree_tops_glob,
		.allow_delete = s->o->tree_allow_delete,
		.keep_setid = s->o->tree_keep_setid,
		.direct = s->o->direct,
		.fsync = s->o->fsync,
	}, &s->stop, NULL);
	if (ret == -ENOTDIR)
		return sess_fail(s, -RDX_ELOCAL, "cannot receive a tree into '%s': not a directory",
				 dst);
	if (ret)
		return sess_fail(s, -RDX_ELOCAL, "cannot receive a tree into '%s': %s", dst,
				 rdx_strerror(ret));
	ret = rdx_sink_open_cb(&x->sink, dst, tree_feed, tree_end, x->tree);
	if (ret) {
		rdx_tree_unpack_end_feed(x->tree);
		end_tree(x, false);
		return sess_fail(s, ret, "out of memory");
	}
	return 0;
}

/* Opens the output and the ring once the sender is authenticated.  A
 * failure here ends rdrecv (the sender is told why). */
int rx_prepare(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	const struct rdx_xfer_opts *o = s->o;
	uint64_t budget = (uint64_t)o->slots * o->slot_size;
	uint64_t nslots = budget / s->opts.slot_size;
	size_t wire = 0;
	int ret;

	if (!(s->opts.flags & RDX_OPT_TREE) != !o->tree)
		return sess_fail(s, -RDX_EUSAGE, o->tree
				 ? "the sender sends a stream, not a directory tree"
				 : "the sender sends a directory tree: receive it with -r");
	/* A listing of what is here goes only where this side's user asked
	 * for one: a sender is a peer, not a master. */
	if ((s->opts.flags & RDX_OPT_SYNC) && !o->tree_allow_list)
		return sess_fail(s, -RDX_EPROTO,
				 "the sender asked for a listing of what is here, but none of "
				 "--sync, --checksum, --delete or --dry-run was given here");
	ret = o->tree ? open_tree(x) : open_file(x);
	if (ret)
		return ret;
	/* Memory stays what --slots x --slot-size allow, whatever slot size
	 * the sender picked (but at least two slots). */
	if (nslots < 2)
		nslots = 2;
	if (nslots > 1024)
		nslots = 1024;
	nslots = sess_ring_slots((unsigned)nslots, s->opts.flags & RDX_OPT_SIZE_KNOWN,
				 s->opts.size, s->opts.slot_size);
	s->data_max = rdx_data_max(s->opts.slot_size);
	if (s->opts.compress || s->encrypt)
		wire = s->data_max;
	ret = rdx_ring_new(&s->ring, (unsigned)nslots, s->opts.slot_size, wire,
			   true, &s->mem_locked);
	rdx_phase("ring of %u slots of %u KiB allocated%s", (unsigned)nslots,
		  s->opts.slot_size >> 10, s->mem_locked ? " and locked" : "");
	if (ret)
		return sess_fail(s, ret, "cannot allocate %llu slots of %u bytes: %s",
				 (unsigned long long)nslots, s->opts.slot_size,
				 rdx_strerror(ret));
	if (!s->mem_locked)
		sess_warn_unpinned(s);
	rdx_ring_set_stall(s->ring, o->timeout_ms);
	return s->encrypt ? sess_setup_crypto(s, false) : 0;
}

/* --resume: tells the sender what our partial has (its first x->have
 * bytes and their hash) and learns where its data starts: there, or at 0
 * when its file differs.  Either way the end-to-end hash has seen the
 * bytes before the start, so DONE and EOS cover the whole file. */
static int serve_resume(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	struct rdx_conn *c = s->streams[0].conn;
	uint8_t buf[RDX_CTRL_MAX + RDX_TAG_LEN];
	struct rdx_done have = { 0 }, from;
	struct rdx_frame_hdr h;
	struct sess_busy busy;
	struct rdx_errmsg em;
	int ret;

	XXH3_128bits_reset(s->hash);
	/* A partial longer than the file now announced (a bigger file's,
	 * earlier): nothing of it is the new file's start (PROTOCOL.md). */
	if (x->have > s->opts.size)
		x->have = 0;
	sess_busy_begin(s, &busy);
	ret = x->have ? rdx_sink_read_prefix(x->sink, x->have, rdx_hash_prefix, s->hash) : 0;
	sess_busy_end(&busy);
	if (ret) {
		rdx_info(1, "cannot read the partial of '%s': starting over", rdx_sink_name(x->sink));
		x->have = 0;
		XXH3_128bits_reset(s->hash);
	}
	have.total = x->have;
	rdx_hash_digest(s->hash, have.hash);
	rdx_done_encode(&have, buf);
	ret = sess_send_ctrl(s, RDX_F_RESUME, buf, RDX_DONE_LEN);
	if (!ret)
		ret = sess_recv_ctrl(s, c, &h, buf, s->encrypt, &em);
	if (ret == -RDX_EREMOTE)
		return sess_peer_failure(s, &em);
	if (ret)
		return sess_fail_conn(s, c, ret, "lost the connection to the sender");
	if (h.type != RDX_F_RESUME_FROM || rdx_done_decode(buf, h.len, &from) ||
	    from.total > s->opts.size ||
	    (from.total && (from.total != x->have || memcmp(from.hash, have.hash, RDX_HASH_LEN))))
		return sess_fail(s, -RDX_EPROTO, "sender sent a malformed resume offset");
	x->start = from.total;
	if (!x->start)
		XXH3_128bits_reset(s->hash);
	ret = rdx_sink_start_at(x->sink, x->start, s->opts.size - x->start);
	if (ret)
		return sess_fail(s, -RDX_ELOCAL, "cannot write '%s': %s", rdx_sink_name(x->sink),
				 rdx_strerror(ret));
	x->marked = x->start;
	s->opts.size -= x->start;
	if (x->start)
		rdx_info(1, "resuming '%s' after its first %llu bytes", rdx_sink_name(x->sink),
			 (unsigned long long)x->start);
	return 0;
}

static bool committed(struct rdx_session *s)
{
	return receiver_of(s)->committed;
}

static int start_pipeline(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	unsigned i;
	int ret;

	ret = sess_attach(s, true);
	if (ret)
		return ret;
	for (i = 0; i < s->nstreams; i++) {
		ret = pthread_create(&s->streams[i].thread, NULL, stream_main,
				     &s->streams[i]);
		if (ret)
			return sess_fail(s, -ret, "cannot start threads");
		s->streams[i].started = true;
	}
	x->nwriters = rdx_sink_parallel(x->sink) ? s->o->io_threads : 1;
	rdx_info(2, "writing '%s' with %u thread%s%s", rdx_sink_name(x->sink),
		 x->nwriters, x->nwriters == 1 ? "" : "s",
		 rdx_sink_direct(x->sink) ? " and O_DIRECT" : "");
	for (i = 0; i < x->nwriters; i++) {
		ret = pthread_create(&x->writers[i], NULL, writer_main, x);
		if (ret) {
			x->nwriters = i;
			return sess_fail(s, -ret, "cannot start threads");
		}
	}
	return 0;
}

/* Everything is written: check it against EOS, publish the file, tell the
 * sender. */
static int finish(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	XXH128_hash_t hv = XXH3_128bits_digest(s->hash);
	XXH128_canonical_t canon;
	struct rdx_done done;
	uint8_t buf[RDX_DONE_LEN];
	int ret;

	XXH128_canonicalFromHash(&canon, hv);
	if (!x->eos_seen)
		return sess_fail(s, -RDX_EPROTO, "stream ended without end-of-stream message");
	if (x->eos.total != s->total)
		return sess_fail(s, -RDX_EINTEGRITY,
				 "received %llu bytes but the sender sent %llu",
				 (unsigned long long)s->total,
				 (unsigned long long)x->eos.total);
	/* A file is as long as announced: a shorter one is not complete,
	 * whatever the sender's EOS says. */
	if ((s->opts.flags & RDX_OPT_SIZE_KNOWN) && s->total != s->opts.size)
		return sess_fail(s, -RDX_EINTEGRITY,
				 "received %llu bytes of the %llu announced",
				 (unsigned long long)s->total,
				 (unsigned long long)s->opts.size);
	if (memcmp(x->eos.hash, canon.digest, RDX_HASH_LEN))
		return sess_fail(s, -RDX_EINTEGRITY,
				 "data corrupted in transit (xxh3-128 mismatch)");
	if (!x->sink) /* a tree's unpacker ended early (said why, or not) */
		return sess_error(s) ? sess_error(s)
				     : sess_fail(s, -RDX_EPROTO, "sender sent data after the end of the tree");
	ret = rdx_sink_flush(x->sink, s->total);
	if (ret)
		return sess_fail(s, -RDX_ELOCAL, "cannot finish '%s': %s",
				 rdx_sink_name(x->sink), rdx_strerror(ret));
	/* Publish only if nothing failed meanwhile (Ctrl-C during a long
	 * fsync); once the name is in place the transfer has succeeded. */
	if (x->tree) {
		/* Every file was published as its own hash matched; what
		 * is left is the end of the archive and directory times. */
		ret = sess_error(s);
		if (ret || (ret = end_tree(x, true)))
			return ret;
		pthread_mutex_lock(&s->lock);
		ret = s->err;
		s->final = !ret;
		pthread_mutex_unlock(&s->lock);
	} else {
		pthread_mutex_lock(&s->lock);
		ret = s->err;
		if (!ret) {
			ret = rdx_sink_publish(x->sink);
			if (!ret)
				s->final = true;
		}
		pthread_mutex_unlock(&s->lock);
	}
	if (ret && !sess_error(s))
		return sess_fail(s, -RDX_ELOCAL, "cannot finish '%s': %s",
				 rdx_sink_name(x->sink), rdx_strerror(ret));
	if (ret)
		return ret;
	done.total = s->total;
	memcpy(done.hash, canon.digest, RDX_HASH_LEN);
	rdx_done_encode(&done, buf);
	ret = sess_send_ctrl(s, RDX_F_DONE, buf, sizeof(buf));
	if (ret)
		rdx_info(1, "could not confirm to the sender: %s", rdx_strerror(ret));
	return 0;
}

static bool streams_exited(struct rdx_session *s)
{
	return atomic_load(&receiver_of(s)->streams_done) == s->nstreams;
}

static void stop_pipeline(struct receiver *x)
{
	struct rdx_session *s = &x->s;
	unsigned i;

	/* Give the sender a second to read our ERROR and hang up. */
	if (sess_error(s))
		sess_wait(s, streams_exited, 1000);
	sess_stop_streams(s);
	for (i = 0; i < x->nwriters; i++)
		pthread_join(x->writers[i], NULL);
}

int rdx_recv(const struct rdx_xfer_opts *o, struct rdx_xfer_stats *st)
{
	struct receiver *x = calloc(1, sizeof(*x));
	struct rdx_session *s;
	int ret;

	if (!x) {
		rdx_error("out of memory");
		return -ENOMEM;
	}
	s = &x->s;
	pthread_mutex_init(&x->mark_lock, NULL);
	ret = sess_init(s, o, "sender");
	if (ret) {
		sess_fail(s, ret, "cannot set up the session: %s", rdx_strerror(ret));
		goto out;
	}
	rdx_phase("start");
	if (link_open(s) || rx_meet_sender(x) || link_join_streams(s))
		goto out;
	rdx_phase("handshake done, %u stream%s", s->nstreams, s->nstreams == 1 ? "" : "s");
	/* Accepted streams came with the handshake's short limits: from
	 * here on (a listing, a resume, the data) --timeout and no
	 * deadline, on every stream. */
	for (unsigned i = 0; i < s->nstreams; i++) {
		s->streams[i].conn->ops->set_timeout(s->streams[i].conn, o->timeout_ms);
		s->streams[i].conn->ops->set_deadline(s->streams[i].conn, 0, NULL);
	}
	if ((s->opts.flags & RDX_OPT_SYNC) && serve_list(x))
		goto out;
	if ((s->opts.flags & RDX_OPT_RESUME) && serve_resume(x))
		goto out;
	s->t_start_ns = rdx_now_ns();
	sess_progress_start(s);
	if (start_pipeline(x) == 0) {
		rdx_phase("receiving");
		sess_tick_loop(s, false, committed);
	}
out:
	rdx_phase("received, stopping");
	sess_send_error(s);
	stop_pipeline(x);
	rdx_phase("streams stopped");
	sess_stats(s, st, "received");
	if (x->tree)
		end_tree(x, false);
	ret = sess_finish(s);
	if (x->partial && !s->final)
		mark_partial(x, true); /* kept by rdx_sink_close() */
	rdx_sink_close(x->sink);
	link_close(s);
	sess_release(s);
	rdx_phase("done");
	pthread_mutex_destroy(&x->mark_lock);
	free(x);
	return ret;
}

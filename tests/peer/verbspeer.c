/* verbspeer: provokes real verbs faults for the Soft-RoCE test tier.
 *
 *   verbspeer serve PORT              accepts two connections; on each,
 *                                     registers 64 KiB (remote read and
 *                                     write), tells the client where it is,
 *                                     and waits for it to hang up; exits 0
 *                                     when the client's write landed
 *   verbspeer client HOST PORT        one-sided access through the
 *                                     transport's API: a READ and a WRITE in
 *                                     bounds succeed; then, on a first
 *                                     connection a READ with a wrong rkey,
 *                                     on a second a READ past the end, must
 *                                     fail with "remote access error"
 *   verbspeer norecv PORT SECS        an RDMA listener that accepts one
 *                                     connection but never posts a receive:
 *                                     the peer's first SEND exhausts its RNR
 *                                     retries
 *   verbspeer silent HOST PORT SECS   connects (as an rdxfer sender would,
 *                                     through the transport), prints
 *                                     "connected", and says nothing for
 *                                     SECS: a stray that must not hold a
 *                                     listener
 *
 * Prints one line per check ("ok: ...", "FAIL: ..."); exit 0 when all pass.
 */
#include "core/err.h"
#include "core/units.h"
#include "core/verbs/verbs.h"
#include "core/xport.h"

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUF_LEN (64u << 10)
#define PATTERN 0x5a

static int failures;

static void check(int cond, const char *what, const char *detail)
{
	printf("%s: %s%s%s\n", cond ? "ok" : "FAIL", what, detail ? ": " : "",
	       detail ? detail : "");
	fflush(stdout);
	if (!cond)
		failures++;
}

static const struct rdx_net_opts net = { .timeout_ms = 10000 };

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* The descriptor travels as one frame: 24-byte header, then addr, rkey,
 * len (the transport moves bytes; the frame type does not matter here). */
static int send_desc(struct rdx_conn *c, const struct rdx_verbs_remote *d)
{
	struct rdx_frame_hdr h = { .type = RDX_F_DONE, .len = 24 };
	uint8_t m[24];

	put64(m, d->addr);
	put64(m + 8, d->rkey);
	put64(m + 16, d->len);
	return c->ops->send(c, &h, m);
}

static int recv_desc(struct rdx_conn *c, struct rdx_verbs_remote *d)
{
	uint8_t m[RDX_HDR_LEN + 24];
	int ret = c->ops->recv(c, m, sizeof(m));

	if (ret)
		return ret;
	d->addr = get64(m + RDX_HDR_LEN);
	d->rkey = (uint32_t)get64(m + RDX_HDR_LEN + 8);
	d->len = get64(m + RDX_HDR_LEN + 16);
	return 0;
}

static int serve(const char *port)
{
	struct rdx_listener *l;
	int round, ret;

	ret = rdx_xport_verbs.listen(&net, port, &l);
	if (ret) {
		fprintf(stderr, "verbspeer: listen: %s\n", rdx_strerror(ret));
		return 2;
	}
	for (round = 0; round < 2; round++) {
		uint8_t *buf = aligned_alloc(4096, BUF_LEN);
		struct rdx_verbs_remote d;
		struct rdx_verbs_mr *mr;
		struct rdx_conn *c;
		uint8_t byte;
		uint64_t until = rdx_now_ns() + 30000000000ull;
		size_t i;

		do
			ret = l->ops->accept(l, &net, 500, &c);
		while (ret == -EAGAIN && rdx_now_ns() < until);
		if (ret) {
			fprintf(stderr, "verbspeer: accept: %s\n", rdx_strerror(ret));
			return 2;
		}
		memset(buf, PATTERN, BUF_LEN);
		ret = rdx_verbs_reg(c, buf, BUF_LEN, true, true, &mr);
		if (ret) {
			fprintf(stderr, "verbspeer: reg: %s\n", c->why);
			return 2;
		}
		rdx_verbs_desc(mr, &d);
		send_desc(c, &d);
		/* The client hangs up when done: recv ends then. */
		c->ops->recv(c, &byte, 1);
		for (i = 8192; i < 8192 + 4096 && buf[i] == (uint8_t)(round + 1); i++)
			;
		check(i == 8192 + 4096, "the client's RDMA write landed in our buffer", NULL);
		for (i = 0; i < 8192 && buf[i] == PATTERN; i++)
			;
		check(i == 8192, "bytes outside the write are untouched", NULL);
		rdx_verbs_dereg(mr);
		c->ops->close(c);
		free(buf);
	}
	l->ops->close_listener(l);
	return failures ? 1 : 0;
}

static struct rdx_conn *dial(const char *host, const char *port)
{
	struct rdx_conn *c;
	int last = 0, ret;

	ret = rdx_xport_verbs.connect(&net, host, port, rdx_now_ns() + 20000000000ull,
				      NULL, &last, &c);
	if (ret) {
		fprintf(stderr, "verbspeer: connect: %s (%s)\n", rdx_strerror(ret),
			strerror(last));
		exit(2);
	}
	return c;
}

/* One connection: a good READ and WRITE, then the bad access. */
static void client_round(const char *host, const char *port, int round)
{
	uint8_t *buf = aligned_alloc(4096, BUF_LEN);
	struct rdx_conn *c = dial(host, port);
	struct rdx_verbs_remote d, bad;
	struct rdx_verbs_mr *mr;
	uint64_t t0;
	size_t i;
	int ret;

	if (recv_desc(c, &d) || rdx_verbs_reg(c, buf, BUF_LEN, false, false, &mr)) {
		fprintf(stderr, "verbspeer: setup failed: %s\n", c->why);
		exit(2);
	}
	memset(buf, 0, BUF_LEN);
	ret = rdx_verbs_rw(c, false, mr, buf, 4096, &d, 0);
	for (i = 0; i < 4096 && buf[i] == PATTERN; i++)
		;
	check(ret == 0 && i == 4096, "RDMA READ of the peer's buffer", c->why[0] ? c->why : NULL);
	memset(buf, round + 1, 4096);
	ret = rdx_verbs_rw(c, true, mr, buf, 4096, &d, 8192);
	check(ret == 0, "RDMA WRITE into the peer's buffer", c->why[0] ? c->why : NULL);
	ret = rdx_verbs_rw(c, false, mr, buf + BUF_LEN - 100, 4096, &d, 0);
	check(ret == -EINVAL, "a local range outside our registration is refused", NULL);

	bad = d;
	t0 = rdx_now_ns();
	if (round == 0) {
		bad.rkey ^= 0x5a5a00;
		ret = rdx_verbs_rw(c, false, mr, buf, 4096, &bad, 0);
	} else {
		ret = rdx_verbs_rw(c, false, mr, buf, 4096, &bad, d.len - 100);
	}
	check(ret != 0 && strstr(c->why, "remote access error") != NULL,
	      round == 0 ? "RDMA READ with a wrong rkey fails: remote access error"
			 : "RDMA READ past the end of the peer's buffer fails: remote access error",
	      c->why);
	check(rdx_now_ns() - t0 < 10000000000ull, "the failure came within 10 s", NULL);
	rdx_verbs_dereg(mr);
	c->ops->close(c);
	free(buf);
}

static int client(const char *host, const char *port)
{
	client_round(host, port, 0);
	client_round(host, port, 1);
	return failures ? 1 : 0;
}

/* Raw rdma_cm: accept with a queue pair that never gets a receive. */
static int norecv(const char *port, unsigned secs)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
				   .sin6_port = htons((uint16_t)atoi(port)) };
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa = { 0 };
	/* The RNR retry count in the CM reply is the one the connecting side
	 * uses: finite, as rdxfer's own listener sets it. */
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1,
				     .retry_count = 7, .rnr_retry_count = 6 };
	struct ibv_cq *cq;

	if (!ch || rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sa) || rdma_listen(lid, 1)) {
		perror("verbspeer: listen");
		return 2;
	}
	printf("listening\n");
	fflush(stdout);
	if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		fprintf(stderr, "verbspeer: no connect request\n");
		return 2;
	}
	id = ev->id;
	rdma_ack_cm_event(ev);
	cq = ibv_create_cq(id->verbs, 16, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	if (!cq || rdma_create_qp(id, NULL, &qa) || rdma_accept(id, &p)) {
		perror("verbspeer: accept");
		return 2;
	}
	printf("accepted; posting no receives\n");
	fflush(stdout);
	sleep(secs);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	ibv_destroy_cq(cq);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	return 0;
}

static int silent(const char *host, const char *port, unsigned secs)
{
	struct rdx_conn *c = dial(host, port);

	printf("connected\n");
	sleep(secs);
	c->ops->close(c);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && !strcmp(argv[1], "serve"))
		return serve(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	if (argc == 4 && !strcmp(argv[1], "norecv"))
		return norecv(argv[2], (unsigned)atoi(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "silent"))
		return silent(argv[2], argv[3], (unsigned)atoi(argv[4]));
	fprintf(stderr, "usage: verbspeer serve PORT | client HOST PORT | norecv PORT SECS | "
			"silent HOST PORT SECS\n");
	return 2;
}

/* The "dc" provider of S3 over RDMA: a cuObject-style DC target, for the
 * third-party servers (NooBaa, MinIO AIStor) that reach a client's buffer
 * through their own DC initiator rather than over a connection the client
 * opened.  The client makes an mlx5 DC target (DCT) with the DC access key
 * on the device and port that route to the endpoint, registers its buffer
 * there, and names both in the token (qpn: the DCT number; lid or GID: the
 * port); the server's NIC connects per operation.
 *
 * mlx5 (ConnectX) only, and untested on hardware here: Soft-RoCE has no
 * DC transport.  What runs here is the setup up to the point a non-mlx5
 * device refuses, and the token.  docs/S3.md says so. */
#include "s3/rdma.h"

#include "core/err.h"
#include "core/verbs/verbs_probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef RDX_HAVE_MLX5DV
#include <infiniband/mlx5dv.h>

struct s3_rdma_dc {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *dct;
	struct ibv_mr *mr;
};

/* The index of the GID gid (16 bytes) on ctx's port, or -1. */
static int gid_index(struct ibv_context *ctx, unsigned port, int tbl, const uint8_t *gid)
{
	union ibv_gid g;
	int i;

	for (i = 0; i < tbl; i++)
		if (!ibv_query_gid(ctx, (uint8_t)port, i, &g) && !memcmp(g.raw, gid, 16))
			return i;
	return -1;
}

static int dc_fail(struct s3_rdma_dc *d, int err, char *why, size_t wl, const char *fmt,
		   const char *arg)
{
	snprintf(why, wl, fmt, arg);
	s3_rdma_dc_close(d);
	return err;
}

int s3_rdma_dc_open(const char *host, void *buf, size_t cap, uint64_t key,
		    struct s3_rdma_dc **out, struct s3_rdma_token *t, char *why, size_t wl)
{
	struct rdx_verbs_route rt;
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr_ex ax = { 0 };
	struct mlx5dv_qp_init_attr dx = { 0 };
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 1, .max_sge = 1 } };
	struct ibv_qp_attr qa = { 0 };
	struct s3_rdma_dc *d;
	uint8_t sgid[16] = { 0 };
	bool roce;
	int n = 0, i, gi = 0, ret;

	*out = NULL;
	ret = rdx_verbs_route(host, NULL, AF_UNSPEC, 1500, &rt, why, wl);
	if (ret)
		return ret == -ENODEV ? -RDX_ENOTSUP : -RDX_ECONNECT;
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), rt.dev))
			break;
	if (!list || i == n) {
		if (list)
			ibv_free_device_list(list);
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "device %s is gone", rt.dev);
	}
	if (!mlx5dv_is_supported(list[i])) {
		ibv_free_device_list(list);
		return dc_fail(d, -RDX_ENOTSUP, why, wl,
			       "%s is not an mlx5 (ConnectX) device: DC targets need one", rt.dev);
	}
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx || ibv_query_port(d->ctx, (uint8_t)rt.port, &pa))
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "cannot open %s", rt.dev);
	roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
	if (roce) {
		if (inet_pton(AF_INET6, rt.sgid, sgid) != 1 ||
		    (gi = gid_index(d->ctx, rt.port, pa.gid_tbl_len, sgid)) < 0)
			return dc_fail(d, -RDX_ENOTSUP, why, wl,
				       "no GID of %s matches the route's", rt.dev);
	}
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = d->pd ? ibv_create_cq(d->ctx, 1, NULL, NULL, 0) : NULL;
	d->srq = d->cq ? ibv_create_srq(d->pd, &sa) : NULL;
	if (!d->srq)
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "cannot make a DC target's queues on %s",
			       rt.dev);
	ax.qp_type = IBV_QPT_DRIVER;
	ax.send_cq = d->cq;
	ax.recv_cq = d->cq;
	ax.srq = d->srq;
	ax.pd = d->pd;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	dx.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
	dx.dc_init_attr.dc_type = MLX5DV_DCTYPE_DCT;
	dx.dc_init_attr.dct_access_key = key;
	d->dct = mlx5dv_create_qp(d->ctx, &ax, &dx);
	if (!d->dct)
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "%s would not make a DC target", rt.dev);
	qa.qp_state = IBV_QPS_INIT;
	qa.pkey_index = 0;
	qa.port_num = (uint8_t)rt.port;
	qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(d->dct, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
						 IBV_QP_ACCESS_FLAGS))
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "%s: the DC target would not start (INIT)",
			       rt.dev);
	memset(&qa, 0, sizeof(qa));
	qa.qp_state = IBV_QPS_RTR;
	qa.path_mtu = pa.active_mtu;
	qa.min_rnr_timer = 12;
	qa.ah_attr.port_num = (uint8_t)rt.port;
	qa.ah_attr.is_global = roce;
	qa.ah_attr.grh.hop_limit = 64;
	qa.ah_attr.grh.sgid_index = (uint8_t)gi;
	/* The DCT number exists from RTR on; a DCT has no RTS. */
	if (ibv_modify_qp(d->dct, &qa, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
						 IBV_QP_PATH_MTU))
		return dc_fail(d, -RDX_ENOTSUP, why, wl, "%s: the DC target would not start (RTR)",
			       rt.dev);
	d->mr = ibv_reg_mr(d->pd, buf, cap,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!d->mr)
		return dc_fail(d, -RDX_ENOTSUP, why, wl,
			       "cannot register the buffer on %s (ulimit -l?)", rt.dev);
	memset(t, 0, sizeof(*t));
	t->raddr = (uintptr_t)buf;
	t->rkey = d->mr->rkey;
	t->lid = pa.lid;
	t->qpn = d->dct->qp_num;
	t->has_gid = roce;
	if (roce)
		memcpy(t->gid, sgid, 16);
	*out = d;
	return 0;
}

void s3_rdma_dc_close(struct s3_rdma_dc *d)
{
	if (!d)
		return;
	if (d->mr)
		ibv_dereg_mr(d->mr);
	if (d->dct)
		ibv_destroy_qp(d->dct);
	if (d->srq)
		ibv_destroy_srq(d->srq);
	if (d->cq)
		ibv_destroy_cq(d->cq);
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	free(d);
}

#else /* no mlx5dv.h at build time */

int s3_rdma_dc_open(const char *host, void *buf, size_t cap, uint64_t key,
		    struct s3_rdma_dc **out, struct s3_rdma_token *t, char *why, size_t wl)
{
	(void)host, (void)buf, (void)cap, (void)key, (void)t;
	*out = NULL;
	snprintf(why, wl, "this build has no DC provider (mlx5dv.h was missing)");
	return -RDX_ENOTSUP;
}

void s3_rdma_dc_close(struct s3_rdma_dc *d)
{
	(void)d;
}

#endif

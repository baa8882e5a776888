/* What this host offers for RDMA: its verbs devices and ports, whether
 * rdma_cm reaches a destination through one of them, and the memory-lock
 * limit the transport's registered memory counts against.  rdx-diag prints
 * it; --transport auto asks rdx_verbs_route() before choosing rdma.
 *
 * Plain values only: nothing here keeps a device open after it returns. */
#ifndef RDX_VERBS_PROBE_H
#define RDX_VERBS_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RDX_VERBS_TEXT 64 /* room for a device name, GID or address as text */

struct rdx_verbs_gid {
	unsigned index;
	char gid[RDX_VERBS_TEXT];    /* "fe80::5054:ff:fe12:3456", "::ffff:192.0.2.1" */
	char type[16];		     /* "RoCE v2", "RoCE v1", "IB"; "" when unknown */
	char netdev[RDX_VERBS_TEXT]; /* "eth0"; "" for none (InfiniBand) or unknown */
};

struct rdx_verbs_port {
	unsigned num; /* 1-based, as verbs and rdma_cm count */
	bool active;
	char state[24];	     /* "ACTIVE", "DOWN", "INIT", "ARMED" ... */
	char link_layer[16]; /* "InfiniBand", "Ethernet" or "unknown" */
	unsigned active_mtu; /* bytes, 256..4096; 0 when unknown */
	unsigned max_mtu;    /* bytes; 0 when unknown */
	char speed[32];	     /* "100 Gb/s (4X EDR)"; "" when unknown */
	unsigned lid;	     /* InfiniBand only; 0 otherwise */
	unsigned gid_tbl_len;
	struct rdx_verbs_gid *gids; /* the non-zero entries, by index */
	size_t ngids;
};

struct rdx_verbs_dev {
	char name[RDX_VERBS_TEXT];  /* "mlx5_0", "rxe0" */
	int err;		    /* 0, or -errno: could not open or query it */
	char node_guid[24];	    /* "0002:c903:0042:1a2b" */
	char fw_ver[RDX_VERBS_TEXT];
	struct rdx_verbs_port *ports;
	size_t nports;
	bool any_active;
};

/* Lists every RDMA device with its ports and non-zero GIDs into a new
 * array (*out, *n; free with rdx_verbs_devices_free).  A device that cannot
 * be opened or queried is listed with its err set and no ports.  Returns 0
 * (possibly with *n == 0), -ENOSYS when the kernel has no RDMA support at
 * all, -ENOMEM, or another -errno from ibv_get_device_list. */
int rdx_verbs_devices(struct rdx_verbs_dev **out, size_t *n);

/* Frees what rdx_verbs_devices() returned; NULL is fine. */
void rdx_verbs_devices_free(struct rdx_verbs_dev *devs, size_t n);

/* Says whether any port of any listed device is ACTIVE. */
bool rdx_verbs_any_active(const struct rdx_verbs_dev *devs, size_t n);

/* Writes why no device can be used, for err as returned by
 * rdx_verbs_devices() (0: the list was empty): "no RDMA devices (...)". */
void rdx_verbs_none_reason(int err, char *why, size_t whylen);

struct rdx_verbs_route {
	char dev[RDX_VERBS_TEXT];    /* the device rdma_cm chose: "rxe0" */
	unsigned port;		     /* its port, 1-based */
	char local[RDX_VERBS_TEXT];  /* our address on that route */
	char remote[RDX_VERBS_TEXT]; /* the destination address that resolved */
	char sgid[RDX_VERBS_TEXT];   /* our GID on the path; "" when unknown */
};

/* Asks rdma_cm whether host (a name, an address, or "[v6addr]") is
 * reachable through an RDMA device: resolves it with getaddrinfo (family
 * AF_UNSPEC, AF_INET or AF_INET6), then rdma_resolve_addr from bind (NULL:
 * any) and rdma_resolve_route on a fresh id with its own event channel,
 * trying each address in turn.  Gives up after about timeout_ms (plus a
 * fraction of a second of grace); never blocks longer.  Returns 0 and fills
 * *r, or a negative error with a one-line reason in why: -ENOENT (host or
 * bind does not resolve), -EINVAL, -ENODEV (no RDMA devices, or none on the
 * way to host), -ETIMEDOUT, or another -errno from rdma_cm. */
int rdx_verbs_route(const char *host, const char *bind, int family,
		    unsigned timeout_ms, struct rdx_verbs_route *r, char *why,
		    size_t whylen);

/* The local address that makes rdma_cm use device dev (NULL: the only
 * one), port (0: its first ACTIVE port) and, when gid_index >= 0, that GID:
 * rdma_cm picks device, port and GID from the local address, so this is
 * how --rdma-dev, --rdma-port and --gid-index take effect.  A RoCE GID
 * carries its IP (::ffff:a.b.c.d, or a routable IPv6 address); without a
 * GID index the first such GID of the port (RoCE v2 first) is taken; an
 * InfiniBand port goes by its IPoIB interface's address.  family limits
 * the choice (AF_UNSPEC: either).  Writes the address as text to addr.
 * Returns 0, or -ENODEV (no such device or port), -ENOENT (no such GID,
 * or no address on it) or -EINVAL, with a one-line reason in why. */
int rdx_verbs_local_addr(const char *dev, unsigned port, int gid_index,
			 int family, char *addr, size_t len, char *why,
			 size_t whylen);

#define RDX_MEMLOCK_UNLIMITED UINT64_MAX

/* Reads RLIMIT_MEMLOCK: returns the soft limit in bytes
 * (RDX_MEMLOCK_UNLIMITED for none), writes it as text ("unlimited",
 * "8.00 MiB") to text, and the hard limit to *hard unless hard is NULL.
 * When the limit cannot be read, returns 0 and writes "unknown". */
uint64_t rdx_memlock_limit(char *text, size_t len, uint64_t *hard);

#endif

/* Host names and addresses as the tools take and show them: scp-style
 * "[v6addr]" accepted, peers shown as "a.b.c.d:port" or "[v6]:port" (an
 * IPv4 peer seen through a dual-stack socket shown as IPv4).  Shared by
 * every transport and by the RDMA probe. */
#ifndef RDX_ADDR_H
#define RDX_ADDR_H

#include <netdb.h>
#include <stddef.h>
#include <sys/socket.h>

/* Strips scp-style brackets ("[::1]") into buf.  Returns the name to
 * resolve (host itself when unbracketed), or NULL when they are malformed. */
const char *rdx_unbracket(const char *host, char *buf, size_t len);

/* getaddrinfo for a stream socket, brackets accepted.  Returns 0 with *res
 * set, -EINVAL for malformed brackets, -ENOENT when the name does not
 * resolve, or -errno for a system error. */
int rdx_resolve(const char *host, const char *port, int family, int flags,
		struct addrinfo **res);

/* "a.b.c.d:port" or "[v6]:port", or "?" (sa may be NULL). */
void rdx_addr_text(const struct sockaddr *sa, char *out, size_t outlen);

#endif

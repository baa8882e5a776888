#include "core/addr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

const char *rdx_unbracket(const char *host, char *buf, size_t len)
{
	size_t n = strlen(host);

	if (host[0] != '[')
		return host;
	if (n < 3 || host[n - 1] != ']' || n - 2 >= len)
		return NULL;
	memcpy(buf, host + 1, n - 2);
	buf[n - 2] = '\0';
	return buf;
}

int rdx_resolve(const char *host, const char *port, int family, int flags,
		struct addrinfo **res)
{
	struct addrinfo hints = { .ai_family = family,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = flags };
	char buf[256];
	int ret;

	if (host) {
		host = rdx_unbracket(host, buf, sizeof(buf));
		if (!host)
			return -EINVAL;
	}
	ret = getaddrinfo(host, port, &hints, res);
	if (ret == EAI_SYSTEM)
		return errno ? -errno : -ENOENT;
	return ret ? -ENOENT : 0;
}

void rdx_addr_text(const struct sockaddr *sa, char *out, size_t outlen)
{
	char host[64] = "?"; /* an IPv6 address with its %scope */

	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
		snprintf(out, outlen, "%s:%u", host, ntohs(s4->sin_port));
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		/* Dual-stack sockets see IPv4 peers as ::ffff:a.b.c.d. */
		if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {
			inet_ntop(AF_INET, &s6->sin6_addr.s6_addr[12], host, sizeof(host));
			snprintf(out, outlen, "%s:%u", host, ntohs(s6->sin6_port));
		} else {
			/* getnameinfo keeps a link-local address's %scope */
			if (getnameinfo(sa, sizeof(*s6), host, sizeof(host), NULL, 0,
					NI_NUMERICHOST))
				snprintf(host, sizeof(host), "?");
			snprintf(out, outlen, "[%s]:%u", host, ntohs(s6->sin6_port));
		}
	} else {
		snprintf(out, outlen, "?");
	}
}

/* libFuzzer target: hostile bytes on a connection to rds3 serve's HTTP/1.1
 * reader (src/s3/serve_http.c).  The bytes are written into one end of a
 * socket pair, that end is shut for writing, and the other end is read as
 * the server reads it: request after request, each body to its end.
 * Whatever the bytes, the reader must neither fault nor loop: every
 * request read has a method, a decoded path starting with '/', at most
 * SV_HDRS_MAX headers and SV_QUERY_MAX parameters, and a body no longer
 * than what was sent. */
#include "fuzz.h"
#include "s3/serve/serve_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct sv_conn c;
	static struct sv_req r;
	static char body[4096];
	atomic_int stop = 0;
	int sv[2];
	size_t total = 0;

	if (size > 60000 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 0;
	if (size && write(sv[1], data, size) != (ssize_t)size) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	shutdown(sv[1], SHUT_WR);
	memset(&c, 0, sizeof(c));
	c.fd = sv[0];
	c.timeout_secs = 1;
	c.stop = &stop;
	while (!c.broken) {
		int ret = sv_read_request(&c, &r);

		if (ret) {
			sv_req_release(&r);
			break;
		}
		if (!r.method || !r.method[0] || !r.path || r.path[0] != '/' ||
		    r.nhdr > SV_HDRS_MAX || r.nquery > SV_QUERY_MAX)
			abort();
		for (;;) {
			ssize_t n = sv_body_read(&c, &r, body, sizeof(body));

			if (n <= 0)
				break;
			total += (size_t)n;
			if (total > size)
				abort(); /* more body than bytes sent */
		}
		if (!r.keep_alive || !r.body_end)
			c.broken = true;
		sv_req_release(&r);
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}

#include "cmd/s3opts.h"

#include "core/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

int s3opts_handle(struct s3_copy_opts *o, int key, const char *arg)
{
	switch (key) {
	case S3OPT_PROFILE:
		o->co.profile = arg;
		return 0;
	case S3OPT_ENDPOINT:
		o->co.endpoint = arg;
		return 0;
	case S3OPT_REGION:
		o->co.region = arg;
		return 0;
	case S3OPT_NO_SIGN:
		o->co.no_sign = true;
		return 0;
	case S3OPT_PATH_STYLE:
		o->co.addressing = S3_ADDR_PATH;
		return 0;
	case S3OPT_VIRTUAL_HOST:
		o->co.addressing = S3_ADDR_VIRTUAL;
		return 0;
	case S3OPT_INSECURE:
		o->insecure = true;
		return 0;
	case S3OPT_RDMA:
		if (!arg) {
			o->rdma = S3_RDMA_ON;
		} else if (s3_rdma_mode_parse(arg, &o->rdma)) {
			rdx_error("invalid value '%s' for --rdma: expected auto, on or off", arg);
			return -1;
		}
		o->rdma_set = true;
		return 0;
	case S3OPT_RDMA_DC: {
		char *end;
		unsigned long long k = S3_RDMA_DC_KEY;

		if (arg) {
			errno = 0;
			k = strtoull(arg, &end, 16);
			if (!*arg || *end || errno || *arg == '-' || *arg == '+' || *arg == ' ') {
				rdx_error("invalid value '%s' for --rdma-dc: expected a DC access key in hex",
					  arg);
				return -1;
			}
		}
		o->rdma_dc = true;
		o->rdma_dc_key = k;
		return 0;
	}
	default:
		return 1;
	}
}

const char *s3opts_name(int key)
{
	static const struct rdx_opt opts[] = { S3OPT_ENTRIES };

	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		if (opts[i].key == key)
			return opts[i].name;
	return NULL;
}

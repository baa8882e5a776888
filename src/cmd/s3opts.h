/* The options that say where S3 is and as whom, defined once for the two
 * tools that take them: rds3, and rdcp for its s3:// copies.  Each tool's
 * option table includes S3OPT_ENTRIES and passes these keys to
 * s3opts_handle(), which fills the struct both give the S3 library. */
#ifndef RDX_S3OPTS_H
#define RDX_S3OPTS_H

#include "cmd/opt.h"
#include "s3/copy.h"

enum s3opt_key {
	S3OPT_PROFILE = 700,
	S3OPT_ENDPOINT,
	S3OPT_REGION,
	S3OPT_NO_SIGN,
	S3OPT_PATH_STYLE,
	S3OPT_VIRTUAL_HOST,
	S3OPT_INSECURE,
	S3OPT_RDMA,
	S3OPT_RDMA_DC,
};

#define S3OPT_ENTRIES                                                                 \
	{ "profile", S3OPT_PROFILE, RDX_ARG_REQUIRED, "NAME",                         \
	  "S3: this profile of ~/.aws/credentials and ~/.aws/config", NULL },         \
	{ "endpoint", S3OPT_ENDPOINT, RDX_ARG_REQUIRED, "URL",                        \
	  "S3: the endpoint, http[s]://host[:port] (default: the environment, the "   \
	  "profile, else AWS)",                                                       \
	  NULL },                                                                     \
	{ "region", S3OPT_REGION, RDX_ARG_REQUIRED, "REGION",                         \
	  "S3: the region to sign for (default: the environment or the profile)",     \
	  NULL },                                                                     \
	{ "no-sign-request", S3OPT_NO_SIGN, RDX_ARG_NONE, NULL,                       \
	  "S3: send requests unsigned (public buckets)", NULL },                      \
	{ "path-style", S3OPT_PATH_STYLE, RDX_ARG_NONE, NULL,                         \
	  "S3: address buckets as http://host/bucket/key", NULL },                    \
	{ "virtual-host", S3OPT_VIRTUAL_HOST, RDX_ARG_NONE, NULL,                     \
	  "S3: address buckets as http://bucket.host/key", NULL },                    \
	{ "insecure", S3OPT_INSECURE, RDX_ARG_NONE, NULL,                             \
	  "S3: do not verify the server's TLS certificate", NULL },                   \
	{ "rdma", S3OPT_RDMA, RDX_ARG_OPTIONAL, "MODE",                               \
	  "S3 over RDMA: auto (default: where the endpoint takes it), on (bare "      \
	  "--rdma; fail, exit 3, where it cannot be set up) or off; RDS3_RDMA sets "  \
	  "the default.  serve: on or auto also serves it (default off)",             \
	  NULL },                                                                     \
	{ "rdma-dc", S3OPT_RDMA_DC, RDX_ARG_OPTIONAL, "KEY",                          \
	  "S3 over RDMA to cuObject-style servers (NooBaa, AIStor): a DC target "     \
	  "with DC access key KEY (hex, default ffeeddcc) instead of a connection; "  \
	  "mlx5 (ConnectX) only, untested on hardware",                               \
	  NULL }

/* Takes key (with its arg) into o.  Returns 0, -1 for a bad value (said),
 * or 1 when key is not one of S3OPT_ENTRIES. */
int s3opts_handle(struct s3_copy_opts *o, int key, const char *arg);

/* The option's name, for messages ("--profile"), or NULL. */
const char *s3opts_name(int key);

#endif

/* rds3 serve: a directory served as an S3 endpoint over HTTP/1.1,
 * path-style (http://HOST:PORT/BUCKET/KEY).  Bucket B is the directory
 * ROOT/B, key K the file ROOT/B/K ('/' makes subdirectories), so what is
 * uploaded can be read from disk and what is put there by hand is served.
 * Requests are verified with AWS Signature Version 4 (header or presigned
 * URL) against one access key, or the several of users_file, each of
 * whom owns the buckets it makes, unless no_sign.  docs/S3.md ("rds3
 * serve") says what is supported. */
#ifndef RDS3_SERVE_H
#define RDS3_SERVE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>

struct s3_serve_opts {
	const char *root;	/* the directory served */
	const char *listen;	/* address to bind, numeric */
	unsigned port;		/* 0: an ephemeral one */
	const char *access_key; /* the one key requests must be signed */
	const char *secret_key; /* with; NULL with no_sign or users_file */
	const char *users_file; /* --users: the access keys instead */
	bool no_sign;		/* serve anyone, nothing is checked */
	unsigned max_conns;	/* connections served at once */
	unsigned max_per_addr;	/* ... of them from one address */
	unsigned header_secs;	/* a request's header in whole within this */
	unsigned timeout_secs;	/* an idle or stalled connection is closed */
	unsigned upload_expiry_days; /* incomplete multipart uploads begun this
				      * long ago are removed (0: never) */
	bool rdma;		/* also serve x-amz-rdma-token requests */
	unsigned rdma_conns;	/* RDMA connections at once */
	int verbose;		/* 1: a line per request on stderr */
	const atomic_int *stop; /* set by a signal: stop serving */
	FILE *announce;		/* gets "http://ADDR:PORT\n" once listening */
};

/* Serves until *stop.  Returns an exit status (RDX_EXIT_*): 0 after a
 * stop, else why it could not start (the reason on stderr). */
int s3_serve(const struct s3_serve_opts *o);

#endif

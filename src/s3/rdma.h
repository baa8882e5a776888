/* S3 over RDMA, rdxfer's "rc" provider (docs/S3.md, "S3 over RDMA"): the
 * request, its signature and the answer stay ordinary S3 over HTTP; the
 * object's bytes move by RDMA between the server and a buffer the client
 * registered, named in the signed x-amz-rdma-token header.
 *
 * The client opens an RC connection (rdma_cm) to the endpoint's host, at
 * the HTTP port's number, and logs in with its S3 credentials:
 *
 *   client HELLO  "RDS3", version, its nonce, the buffer it registered
 *                 (address, length, rkey), its access key id
 *   server AUTH   the server's nonce and HMAC(K, "server" ‖ hello ‖ nonce)
 *   client AUTH   HMAC(K, "client" ‖ hello ‖ nonce)
 *   server ACCEPT (or ERROR, a line of text)
 *
 * K is HMAC-SHA256("AWS4" + secret, "rds3-rdma-login-1"): each end proves
 * it holds the secret; the secret never crosses the wire.  The server
 * then serves that connection's tokens for requests signed with that
 * access key only, and only inside that buffer.
 *
 * This file holds what both ends share (the login's messages and proofs,
 * and how a client reads a server's answer) and the client's side; the
 * server's is src/s3/serve/serve_rdma.c. */
#ifndef RDS3_RDMA_H
#define RDS3_RDMA_H

#include "core/xport.h"
#include "s3/config.h"
#include "s3/rdma_token.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_RDMA_VERSION 1
#define S3_RDMA_KEY_MAX 128	   /* an access key id's length */
#define S3_RDMA_NONCE 32
#define S3_RDMA_MAC 32
#define S3_RDMA_HELLO_MAX (4 + 2 + 2 + S3_RDMA_NONCE + 8 + 8 + 4 + S3_RDMA_KEY_MAX)
#define S3_RDMA_AGENT "rdxfer" /* x-amz-rdma-agent of an rc token */
#define S3_RDMA_DC_AGENT "cuobj" /* ... of a dc token, as NooBaa wants it */
#define S3_RDMA_DC_KEY 0xffeeddccull /* cuObject's default DC access key */
#define S3_RDMA_LOGIN_MS 10000	   /* the whole login, either end (the client:
				    * or its connect timeout, if longer) */

enum s3_rdma_mode { S3_RDMA_OFF, S3_RDMA_AUTO, S3_RDMA_ON };

/* Parses "auto", "on" or "off".  Returns 0 or -EINVAL. */
int s3_rdma_mode_parse(const char *s, enum s3_rdma_mode *out);

/* ------------------------------------------------------------- login */

struct s3_rdma_hello {
	uint16_t version;
	char access_key[S3_RDMA_KEY_MAX + 1]; /* "" for an unsigned server */
	uint8_t nonce[S3_RDMA_NONCE];
	uint64_t addr, len; /* the buffer the client registered */
	uint32_t rkey;
};

/* Writes h (S3_RDMA_HELLO_MAX bytes at most); returns the length. */
size_t s3_rdma_hello_encode(const struct s3_rdma_hello *h, uint8_t *out);

/* Reads a HELLO.  Returns 0, -RDX_EPROTO (malformed: magic, lengths, a
 * key of other than printable ASCII, an empty or wrapping buffer) or
 * -RDX_EVERSION. */
int s3_rdma_hello_decode(const uint8_t *in, size_t n, struct s3_rdma_hello *h);

/* The proof of role ("server" or "client") over the HELLO's bytes and the
 * server's nonce, keyed by secret ("" for an unsigned server). */
void s3_rdma_proof(const char *secret, const char *role, const uint8_t *hello,
		   size_t hlen, const uint8_t nonce[S3_RDMA_NONCE],
		   uint8_t out[S3_RDMA_MAC]);

/* One control frame of type with n bytes of p. */
int s3_rdma_send(struct rdx_conn *c, unsigned type, const void *p, size_t n);

/* The next control frame: its type and up to cap bytes into p (*n).  A
 * longer one is -RDX_EPROTO.  Returns 0, RDX_XPORT_EOF, or an error. */
int s3_rdma_recv(struct rdx_conn *c, unsigned *type, void *p, size_t cap,
		 size_t *n);

/* ----------------------------------------------------- what came back */

/* What a data request sent with a token got back. */
enum s3_rdma_verdict {
	S3_RDMA_DONE,	  /* the bytes moved by RDMA: *bytes of them */
	S3_RDMA_DECLINED, /* send it again over plain HTTP */
	S3_RDMA_IGNORED,  /* a GET answered over HTTP: its body is the data */
	S3_RDMA_FAILED,	  /* an S3 error that is not a decline */
	S3_RDMA_BAD,	  /* nonsense: a protocol error */
};

/* The answer to a request sent with a token: status, S3 error code ("" for
 * none; a PUT's BadDigest is a decline too: the server checked Content-MD5
 * against the empty HTTP body, having ignored the token), the x-amz-rdma-reply and x-amz-rdma-bytes-transferred headers
 * (NULL: absent) and the HTTP body's size.  *bytes gets the count of a
 * DONE. */
enum s3_rdma_verdict s3_rdma_verdict(bool get, long status, const char *code,
				     const char *reply, const char *moved,
				     uint64_t body, uint64_t *bytes);

/* Whether an S3 error code is one of the declines (S3InvalidRdmaToken,
 * S3RdmaNotSupported, S3RdmaIoError). */
bool s3_rdma_decline_code(const char *code);

/* ----------------------------------------------------------- client */

struct s3_rdma;

/* How a client's buffer is reached. */
struct s3_rdma_how {
	bool dc;	 /* a DC target (rdma_dc.c), not an RC connection */
	uint64_t dc_key; /* its DC access key */
};

/* rc: connects to cfg's endpoint host at its port's number (RDS3_RDMA_PORT,
 * when set, names another) over RDMA,
 * registers a buffer of cap bytes (remote read and write) and logs in
 * with cfg's credentials, within timeout_ms.  Returns 0, or an error
 * with the reason in why: -RDX_ENOTSUP (no device, the buffer could not
 * be registered), -RDX_ECONNECT (nobody listens there over RDMA),
 * -RDX_EAUTH (the login was refused), -RDX_EPROTO. */
int s3_rdma_open(const struct s3_config *cfg, const struct s3_rdma_how *how, size_t cap,
		 uint64_t timeout_ms, const atomic_int *stop, struct s3_rdma **out,
		 char *why, size_t whylen);
void s3_rdma_close(struct s3_rdma *r);

/* The x-amz-rdma-agent of r's tokens: rdxfer (rc) or cuobj (dc). */
const char *s3_rdma_agent(const struct s3_rdma *r);

/* ---------------------------------------------------- the dc provider */

struct s3_rdma_dc;

/* Makes a DC target with DC access key key on the device and port that
 * route to host, and registers buf (cap bytes) there for remote read and
 * write; *t gets the token's fields but rsize.  Returns 0, or
 * -RDX_ENOTSUP (no device on the way; not an mlx5 one; a build without
 * mlx5dv) or -RDX_ECONNECT (no route), with the reason in why. */
int s3_rdma_dc_open(const char *host, void *buf, size_t cap, uint64_t key,
		    struct s3_rdma_dc **out, struct s3_rdma_token *t, char *why,
		    size_t wl);
void s3_rdma_dc_close(struct s3_rdma_dc *d);

/* The registered buffer and its size. */
void *s3_rdma_buf(const struct s3_rdma *r, size_t *cap);

/* The token of the buffer's first len bytes (1 .. cap). */
int s3_rdma_token(const struct s3_rdma *r, size_t len,
		  char out[S3_RDMA_TOKEN_LEN + 1]);

#endif

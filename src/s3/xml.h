/* The S3 XML documents rds3 reads, parsed with expat: Error,
 * ListAllMyBucketsResult, ListBucketResult (ListObjectsV2) and single
 * fields of the multipart upload results.  Input is
 * hostile: depth, element text and entry counts are bounded, DTDs and
 * external entities are not loaded, and a document that is not well
 * formed is an error (-RDX_EPROTO), never a partial result. */
#ifndef RDS3_XML_H
#define RDS3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_XML_MAX_DEPTH 16
#define S3_XML_MAX_TEXT 4096 /* per element: keys are at most 1024 bytes */
#define S3_XML_MAX_ENTRIES 100000

struct s3_entry {
	char *name;	/* object key, common prefix or bucket name */
	char *mtime;	/* LastModified / CreationDate, as S3 wrote it */
	char *etag;
	char *version;	/* VersionId (a Delete request's Object) */
	uint64_t size;
	bool has_size;	/* size was given (a Delete request's Object) */
	bool is_prefix; /* a CommonPrefixes entry */
};

struct s3_list {
	struct s3_entry *v;
	size_t n, cap;
	bool truncated;
	char *next_token; /* NextContinuationToken, NULL when none */
};

/* Reads Code and Message of an S3 Error document into code and msg (each
 * truncated to its size).  Returns 0, or -RDX_EPROTO when xml is not one. */
int s3_xml_error(const char *xml, size_t n, char *code, size_t codelen,
		 char *msg, size_t msglen);

/* Appends the entries of a ListObjectsV2 (ListBucketResult) document to
 * out and sets truncated / next_token.  Returns 0, -RDX_EPROTO, -E2BIG
 * (too many entries) or -ENOMEM. */
int s3_xml_list_objects(const char *xml, size_t n, struct s3_list *out);

/* Appends the buckets of a ListAllMyBucketsResult document to out. */
int s3_xml_list_buckets(const char *xml, size_t n, struct s3_list *out);

/* Copies the text of FIELD, a child of the document element ROOT
 * (InitiateMultipartUploadResult/UploadId, say), into out.  Returns 0,
 * -RDX_EPROTO (another document, or no such field) or -E2BIG (the text
 * does not fit outlen). */
int s3_xml_field(const char *xml, size_t n, const char *root,
		 const char *field, char *out, size_t outlen);

/* Reads a DeleteObjects answer (DeleteResult): each Error is appended to
 * errors with name = its Key, etag = its Code, mtime = its Message; the
 * number of Deleted elements goes to *deleted.  Returns 0, -RDX_EPROTO
 * (another document, an Error without a Key), -E2BIG or -ENOMEM, with no
 * partial result. */
int s3_xml_delete_result(const char *xml, size_t n, struct s3_list *errors,
			 size_t *deleted);

/* What rds3 serve reads.  A CompleteMultipartUpload request: each Part
 * appended to out with name = its ETag (as sent, quotes and all) and size
 * = its PartNumber (a Part without a PartNumber, or 0, is -RDX_EPROTO),
 * and its checksum, if it names one (ChecksumSHA256, ...): etag = the
 * value, mtime = the algorithm ("SHA256"); two in one Part: -RDX_EPROTO.
 * A Delete request: each Object's Key as name, with its conditions as
 * given (ETag as etag, LastModifiedTime as mtime, Size as size with
 * has_size) and its VersionId as version; *quiet from Quiet.  Same
 * returns as s3_xml_list_objects(), no partial result. */
int s3_xml_complete_request(const char *xml, size_t n, struct s3_list *out);
int s3_xml_delete_request(const char *xml, size_t n, struct s3_list *out,
			  bool *quiet);

/* A Tagging request (PutObjectTagging): each Tag appended to out with
 * name = its Key and etag = its Value (a Tag without both is
 * -RDX_EPROTO). */
int s3_xml_tagging_request(const char *xml, size_t n, struct s3_list *out);

void s3_list_release(struct s3_list *l);

#endif

/* Big-endian integers in wire buffers: every format of the suite (the
 * protocol's frames, the verbs transport's POOL, S3 over RDMA's login)
 * writes its numbers this way. */
#ifndef RDX_BE_H
#define RDX_BE_H

#include <stdint.h>

static inline void rdx_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void rdx_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void rdx_put64(uint8_t *p, uint64_t v)
{
	rdx_put32(p, (uint32_t)(v >> 32));
	rdx_put32(p + 4, (uint32_t)v);
}

static inline uint16_t rdx_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t rdx_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t rdx_get64(const uint8_t *p)
{
	return (uint64_t)rdx_get32(p) << 32 | rdx_get32(p + 4);
}

#endif

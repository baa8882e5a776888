#include "core/progress.h"

#include "core/log.h"
#include "core/units.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REDRAW_NS 250000000ull

void rdx_progress_init(struct rdx_progress *p, bool wanted, bool total_known,
		       uint64_t total)
{
	memset(p, 0, sizeof(*p));
	p->on = wanted && isatty(STDERR_FILENO);
	p->total_known = total_known;
	p->total = total;
	p->start_ns = rdx_now_ns();
}

void rdx_progress_init_lines(struct rdx_progress *p, bool total_known, uint64_t total)
{
	rdx_progress_init(p, false, total_known, total);
	p->on = p->lines = true;
}

void rdx_progress_update(struct rdx_progress *p, uint64_t done)
{
	char line[160], bdone[32], btotal[32];
	uint64_t now = rdx_now_ns();
	double secs, rate;
	int n;

	if (!p->on || now - p->last_ns < (p->lines ? 2 * REDRAW_NS : REDRAW_NS))
		return;
	p->last_ns = now;
	if (p->lines) {
		if (p->total_known)
			n = snprintf(line, sizeof(line), "RDX-PROGRESS %llu %llu\n",
				     (unsigned long long)done, (unsigned long long)p->total);
		else
			n = snprintf(line, sizeof(line), "RDX-PROGRESS %llu -\n",
				     (unsigned long long)done);
		if (n > 0 && write(STDERR_FILENO, line, (size_t)n) < 0)
			p->on = false;
		return;
	}
	secs = (double)(now - p->start_ns) / 1e9;
	rate = secs > 0 ? (double)done / secs : 0;
	rdx_fmt_bytes(bdone, sizeof(bdone), done);
	if (p->total_known && p->total) {
		double frac = (double)done / (double)p->total;
		unsigned eta = rate > 0 ? (unsigned)((double)(p->total - (done < p->total ? done : p->total)) / rate) : 0;
		char bar[31];
		int fill = (int)(frac * 30);

		if (fill > 30)
			fill = 30;
		memset(bar, '#', (size_t)fill);
		memset(bar + fill, '.', (size_t)(30 - fill));
		bar[30] = '\0';
		rdx_fmt_bytes(btotal, sizeof(btotal), p->total);
		n = snprintf(line, sizeof(line),
			     "\r[%s] %3.0f%% %s / %s  %.2f GB/s  ETA %u:%02u ",
			     bar, frac * 100, bdone, btotal, rate / 1e9,
			     eta / 60, eta % 60);
	} else {
		n = snprintf(line, sizeof(line), "\r%s  %.2f GB/s ", bdone,
			     rate / 1e9);
	}
	if (n > 0 && write(STDERR_FILENO, line, (size_t)n) > 0) {
		p->drawn = true;
		atomic_store(&rdx_log_bar, true);
	}
}

void rdx_progress_end(struct rdx_progress *p)
{
	static const char clear[] = "\r\033[K";

	if (p->on && !p->lines && p->drawn && atomic_exchange(&rdx_log_bar, false) &&
	    write(STDERR_FILENO, clear, sizeof(clear) - 1) < 0)
		return;
}

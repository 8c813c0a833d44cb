// The runner's control messages (fd 3): JSON encoding, send and receive, and
// fail, which reports why the sandbox cannot be set up and ends the runner.

#include "runner_linux.h"

// dshr_reasons: why a layer is missing or partial ('; '-separated, added by
// dshr_add_reason), for the ready message's detail and the fail messages.
char dshr_reasons[4096];

// dshr_json_str appends s to out as a JSON string literal.
void dshr_json_str(char *out, size_t cap, const char *s) {
	size_t n = strlen(out);
	if (n + 2 >= cap) return;
	out[n++] = '"';
	for (; *s && n + 8 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = c;
		} else if (c < 0x20 || c == 0x7f) {
			n += snprintf(out + n, cap - n, "\\u%04x", c);
		} else {
			out[n++] = c;
		}
	}
	out[n++] = '"';
	out[n] = 0;
}

// dshr_send_msg sends one control message. It uses send(2) (sendto without an
// address), which the seccomp filter does not route to the supervisor:
// sendmsg is always routed there. Only the listener travels as a
// descriptor, from a helper outside the filter (send_listener); the
// supervisor takes the others with pidfd_getfd.
int dshr_send_msg(const char *msg) {
	ssize_t r;
	do {
		r = send(CTRL_FD, msg, strlen(msg), MSG_NOSIGNAL);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : 0;
}

// dshr_fail reports why the sandbox cannot be set up and ends the runner; the
// command has not been started.
void dshr_fail(const char *fmt, ...) {
	char detail[2048], msg[4600] = "{\"kind\":\"fail\",\"detail\":";
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof detail, fmt, ap);
	va_end(ap);
	dshr_json_str(msg, sizeof msg - 2, detail);
	strcat(msg, "}");
	dshr_send_msg(msg);
	_exit(125);
}

// dshr_fail_sys is dshr_fail for a call that failed with errno e: the message names
// the call (op) and carries e, so that the supervisor can tell running out
// of processes, descriptors or memory from a host that cannot confine.
void dshr_fail_sys(const char *op, int e) {
	char msg[4600];
	snprintf(msg, sizeof msg, "{\"kind\":\"fail\",\"errno\":%d,\"op\":", e);
	dshr_json_str(msg, sizeof msg - 2, op);
	strcat(msg, ",\"detail\":");
	char detail[1200];
	snprintf(detail, sizeof detail, "%s: %s", op, strerror(e));
	dshr_json_str(msg, sizeof msg - 2, detail);
	strcat(msg, "}");
	dshr_send_msg(msg);
	_exit(125);
}

// dshr_out_of_resources: e means no process, descriptor or memory was left.
int dshr_out_of_resources(int e) { return e == EAGAIN || e == EMFILE || e == ENFILE || e == ENOMEM || e == ETOOMANYREFS; }

void dshr_add_reason(const char *fmt, ...) {
	char r[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r, sizeof r, fmt, ap);
	va_end(ap);
	if (dshr_reasons[0]) strncat(dshr_reasons, "; ", sizeof dshr_reasons - strlen(dshr_reasons) - 1);
	strncat(dshr_reasons, r, sizeof dshr_reasons - strlen(dshr_reasons) - 1);
}

ssize_t dshr_recv_msg(char *buf, size_t cap) {
	ssize_t n;
	do {
		n = recv(CTRL_FD, buf, cap, 0);
	} while (n < 0 && errno == EINTR);
	return n;
}

// dshr_recv_fds receives one message into buf with up to max (at most
// MAX_RECV_FDS) descriptors attached (SCM_RIGHTS, close-on-exec): *nfds of
// them, in fds. *trunc is set when more came than max, or the kernel could
// not install them all (no descriptor left under RLIMIT_NOFILE).
ssize_t dshr_recv_fds(char *buf, size_t cap, int *fds, int max, int *nfds, int *trunc) {
	union {
		char buf[CMSG_SPACE(MAX_RECV_FDS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = cap};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf, .msg_controllen = CMSG_SPACE(max * sizeof(int))};
	ssize_t n;
	do {
		n = recvmsg(CTRL_FD, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	*nfds = 0;
	*trunc = n > 0 && (mh.msg_flags & MSG_CTRUNC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (k < 0 || *nfds + k > max) {
			*trunc = 1;
			break;
		}
		memcpy(fds + *nfds, CMSG_DATA(c), k * sizeof(int));
		*nfds += k;
	}
	return n;
}

// The runner's network setup in a net namespace of its own: the loopback,
// the egress proxy's listeners and the stub resolver's sockets.

#include "runner_linux.h"

// parse_addr parses "a.b.c.d" or "[v6]" (brackets optional) into ss.
static socklen_t parse_addr(char *a, int port, struct sockaddr_storage *ss) {
	memset(ss, 0, sizeof *ss);
	size_t l = strlen(a);
	if (a[0] == '[' && l >= 3 && a[l - 1] == ']') {
		a[l - 1] = 0;
		a++;
	}
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		return sizeof *s6;
	}
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		return sizeof *s4;
	}
	dshr_fail("egress: bad address %s", a);
	return 0;
}

// pass_egress_fd hands one egress socket to the supervisor and closes it
// once the supervisor holds its copy; fd -1 says that socket could not be
// made.
static void pass_egress_fd(int fd) {
	char lm[128], ack[64];
	snprintf(lm, sizeof lm, "{\"kind\":\"netlisten\",\"fd\":%d,\"pid\":%d}", fd, getpid() == 1 ? 0 : (int)getpid());
	if (dshr_send_msg(lm) < 0) dshr_fail("pass an egress socket: %s", strerror(errno));
	if (dshr_recv_msg(ack, sizeof ack - 1) <= 0) _exit(125);
	if (fd >= 0) close(fd);
}

// add_lo_address puts the address of ss on the namespace's loopback
// (RTM_NEWADDR), so that a socket can be bound to it: a nameserver of
// resolv.conf that is not a loopback address. It returns 0 or an errno.
static int add_lo_address(const struct sockaddr_storage *ss) {
	struct {
		struct nlmsghdr nh;
		struct ifaddrmsg ifa;
		char attrs[64];
	} req;
	memset(&req, 0, sizeof req);
	const void *addr;
	int alen;
	if (ss->ss_family == AF_INET) {
		addr = &((const struct sockaddr_in *)ss)->sin_addr;
		alen = 4;
	} else {
		addr = &((const struct sockaddr_in6 *)ss)->sin6_addr;
		alen = 16;
	}
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(struct ifaddrmsg));
	req.nh.nlmsg_type = RTM_NEWADDR;
	req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK;
	req.ifa.ifa_family = (unsigned char)ss->ss_family;
	req.ifa.ifa_prefixlen = (unsigned char)(alen * 8);
	req.ifa.ifa_flags = IFA_F_NODAD;
	req.ifa.ifa_scope = RT_SCOPE_HOST;
	req.ifa.ifa_index = if_nametoindex("lo");
	if (req.ifa.ifa_index == 0) return errno ? errno : ENODEV;
	for (int t = 0; t < 2; t++) {
		struct rtattr *rta = (struct rtattr *)((char *)&req + NLMSG_ALIGN(req.nh.nlmsg_len));
		rta->rta_type = t == 0 ? IFA_LOCAL : IFA_ADDRESS;
		rta->rta_len = (unsigned short)RTA_LENGTH(alen);
		memcpy(RTA_DATA(rta), addr, (size_t)alen);
		req.nh.nlmsg_len = NLMSG_ALIGN(req.nh.nlmsg_len) + RTA_ALIGN(rta->rta_len);
	}
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl < 0) return errno;
	struct sockaddr_nl to = {.nl_family = AF_NETLINK};
	if (sendto(nl, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&to, sizeof to) < 0) {
		int e = errno;
		close(nl);
		return e;
	}
	char buf[512];
	ssize_t n = recv(nl, buf, sizeof buf, 0);
	int e = n < 0 ? errno : 0;
	close(nl);
	struct nlmsghdr *h = (struct nlmsghdr *)buf;
	if (e == 0 && (n < (ssize_t)NLMSG_LENGTH(sizeof(struct nlmsgerr)) || h->nlmsg_type != NLMSG_ERROR)) e = EPROTO;
	if (e == 0) e = -((struct nlmsgerr *)NLMSG_DATA(h))->error;
	return e == EEXIST ? 0 : e;
}

// stub_socket binds a UDP socket to port 53 of a (putting the address on
// the loopback first when it is not a loopback address); -1 with errno set
// when that fails.
static int stub_socket(char *a) {
	struct sockaddr_storage ss;
	socklen_t sl = parse_addr(a, 53, &ss);
	int loop = ss.ss_family == AF_INET ? (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127
	                                   : IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&ss)->sin6_addr);
	if (!loop) {
		int e = add_lo_address(&ss);
		if (e) {
			errno = e;
			return -1;
		}
	}
	int u = socket(ss.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (u < 0) return -1;
	int one = 1;
	if (ss.ss_family == AF_INET6) setsockopt(u, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(u, (struct sockaddr *)&ss, sl) < 0) {
		int e = errno;
		close(u);
		errno = e;
		return -1;
	}
	return u;
}

// dshr_loopback_up brings up the loopback of the command's net namespace (its
// only interface): the command's own servers and the egress proxy's
// listeners live there.
void dshr_loopback_up(void) {
	if (!dshr_ns_net) return;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) dshr_fail_sys("socket", errno);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) dshr_fail("read the flags of the sandbox's loopback: %s", strerror(errno));
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0) dshr_fail("bring up the sandbox's loopback: %s", strerror(errno));
	close(s);
}

// dshr_egress_listeners is step 0b, in a net namespace of the runner's own under
// a network allowlist: it brings the namespace's loopback up and listens on
// each address of the spec's "egress" list (comma-separated, "a.b.c.d:port"
// or "[v6]:port": the egress proxy's, then the loopback hosts'), then binds a
// UDP socket to port 53 of each address of the "dns" list (the nameservers
// of resolv.conf, put on the loopback when they are not loopback
// addresses), handing each socket to the supervisor (which takes a copy with
// pidfd_getfd, then acknowledges). The command's connections to those
// addresses thus reach the supervisor, and nothing else can: the namespace
// has no other route.
void dshr_egress_listeners(void) {
	const char *list = dshr_opt_str(KEY_EGRESS);
	if (!list[0] || !dshr_ns_net) return;
	char buf[4096];
	if (strlen(list) >= sizeof buf) dshr_fail("egress: listener list too long");
	strcpy(buf, list);
	int one = 1;
	for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		char *colon = strrchr(a, ':');
		if (!colon) dshr_fail("egress: bad listener address %s", a);
		*colon = 0;
		int port = atoi(colon + 1);
		struct sockaddr_storage ss;
		socklen_t sl = parse_addr(a, port, &ss);
		int l = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l < 0) dshr_fail_sys("socket", errno);
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (ss.ss_family == AF_INET6) setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
		if (bind(l, (struct sockaddr *)&ss, sl) < 0) dshr_fail("egress: listen on %s:%d in the sandbox: %s", a, port, strerror(errno));
		if (listen(l, 512) < 0) dshr_fail("egress: listen on %s:%d in the sandbox: %s", a, port, strerror(errno));
		pass_egress_fd(l);
	}
	const char *dns = dshr_opt_str(KEY_DNS);
	if (strlen(dns) >= sizeof buf) dshr_fail("egress: nameserver list too long");
	strcpy(buf, dns);
	for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
		// A nameserver the namespace cannot take (IPv6 disabled, say)
		// only costs the command that resolver: the supervisor is told
		// with fd -1, and the reason goes with the ready message.
		char name[64];
		snprintf(name, sizeof name, "%s", a);
		int u = stub_socket(a);
		if (u < 0) {
			if (dshr_out_of_resources(errno)) dshr_fail_sys("stub resolver socket", errno);
			dshr_add_reason("no stub resolver at %s: %s", name, strerror(errno));
		}
		pass_egress_fd(u);
	}
}

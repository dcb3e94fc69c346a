/* The least a front door can cost: a native TCP relay for `python bench/server.py --relay`.
 *
 *     cc -O2 -o /tmp/gaigel-relay bench/relay.c
 *     python bench/server.py --compact --streams 1 --door --relay /tmp/gaigel-relay
 *
 * It listens on an ephemeral port of 127.0.0.1, prints that port on one line, and relays
 * every connection byte for byte to 127.0.0.1:PORT (its one argument), on one thread with
 * epoll: no frame parsing, no limits, none of the front door's checks. So what it costs
 * the round trip is what the extra hop itself costs (a loopback send and a wake-up each
 * way), which a front door in native code would pay too. A benchmark tool, not a server
 * part: it trusts its peers (the benchmark's own bots) and stops when killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MAX_FD = 65536 };
static int peer[MAX_FD]; /* the other end of each relayed socket */

static void tune(int fd) {
    int one = 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static struct sockaddr_in loopback(int port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((unsigned short)port);
    return a;
}

/* Writes all of buf; a full send buffer (rare at these message sizes) is waited out. */
static int send_all(int fd, const char *buf, ssize_t n) {
    while (n > 0) {
        ssize_t w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno != EAGAIN) return -1;
            struct pollfd p = {fd, POLLOUT, 0};
            poll(&p, 1, 1000);
            continue;
        }
        buf += w;
        n -= w;
    }
    return 0;
}

static void watch(int ep, int fd) {
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static void drop(int ep, int fd) {
    int other = peer[fd];
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL);
    close(fd);
    close(other);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s BACKEND_PORT\n", argv[0]);
        return 2;
    }
    int backend = atoi(argv[1]);
    int one = 1;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 512) < 0 ||
        getsockname(ls, (struct sockaddr *)&addr, &len) < 0) {
        perror("relay: listen");
        return 1;
    }
    printf("%d\n", ntohs(addr.sin_port));
    fflush(stdout);

    int ep = epoll_create1(0);
    watch(ep, ls);
    static char buf[1 << 16];
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == ls) {
                int client = accept(ls, NULL, NULL);
                if (client < 0) continue;
                int server = socket(AF_INET, SOCK_STREAM, 0);
                struct sockaddr_in to = loopback(backend);
                if (client >= MAX_FD || server < 0 || server >= MAX_FD ||
                    connect(server, (struct sockaddr *)&to, sizeof to) < 0) {
                    close(client);
                    if (server >= 0) close(server);
                    continue;
                }
                tune(client);
                tune(server);
                peer[client] = server;
                peer[server] = client;
                watch(ep, client);
                watch(ep, server);
                continue;
            }
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got < 0 && errno == EAGAIN) continue;
            if (got <= 0 || send_all(peer[fd], buf, got) < 0) drop(ep, fd);
        }
    }
}

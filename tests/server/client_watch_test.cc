// socket_lookup and ClientWatch against real loopback sockets: the server side's socket is found by
// the connection's addresses, a listener by its port, and its backlog can be raised; ClientWatch says
// "not gone" while the client is connected (also with bytes pending) and "gone" once it closed.
#include "server/client_watch.h"
#include "server/socket_lookup.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace minivllm::server {
namespace {

int port_of(int fd, bool peer) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  EXPECT_EQ(rc, 0);
  return ntohs(a.sin_port);
}

// 127.0.0.1:port (port 0: any free one).
sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  return a;
}

// A socket listening on 127.0.0.1 at a free port, with this backlog (httplib's is 5).
int loopback_listener(int backlog) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  const sockaddr_in a = loopback(0);
  EXPECT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(listen(fd, backlog), 0);
  return fd;
}

// A listening socket on 127.0.0.1, a client connected to it, and the accepted server side.
struct Connection {
  int listener = -1, client = -1, server = -1;
  Connection() {
    listener = loopback_listener(4);
    const sockaddr_in a = loopback(port_of(listener, false));
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<const sockaddr*>(&a), sizeof a), 0);
    server = accept(listener, nullptr, nullptr);
    EXPECT_GE(server, 0);
  }
  ~Connection() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) close(fd);
    }
  }
  ClientWatch watch() const {
    return ClientWatch("127.0.0.1", port_of(server, false), "127.0.0.1", port_of(server, true));
  }
};

// A listener with httplib's backlog of 5, never accepting: how many of `n` non-blocking connects
// complete within `ms`. Beyond the accept queue the kernel drops SYNs, so those wait >= 1 s.
int connects_completed(int port, int n, int ms) {
  const sockaddr_in a = loopback(port);
  std::vector<pollfd> fds;
  for (int i = 0; i < n; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a);
    fds.push_back({fd, POLLOUT, 0});
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  int done = 0;
  for (pollfd& p : fds) {
    // Established: writable and no pending error (a SYN still being retried is neither).
    int err = 0;
    socklen_t len = sizeof err;
    if (poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) && getsockopt(p.fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 &&
        err == 0) {
      ++done;
    }
    close(p.fd);
  }
  return done;
}

TEST(SocketLookup, FindsTheListenerByPort) {
  const int fd = loopback_listener(5);
  EXPECT_EQ(find_listening_socket(port_of(fd, false)), fd);
  Connection c;
  // The accepted socket shares its listener's port but does not listen; the client's port has none.
  EXPECT_EQ(find_listening_socket(port_of(c.server, false)), c.listener);
  EXPECT_EQ(find_listening_socket(port_of(c.client, false)), -1);
  close(fd);
}

TEST(SocketLookup, RaisedBacklogTakesABurstOfConnections) {
  const int small = loopback_listener(5);
  const int raised = loopback_listener(5);
  ASSERT_TRUE(raise_listen_backlog(port_of(raised, false), 4096));
  EXPECT_FALSE(raise_listen_backlog(1, 4096));  // nothing listens there in this process
  // The control shows that the test can fail: httplib's backlog leaves most of the burst waiting.
  EXPECT_LT(connects_completed(port_of(small, false), 64, 300), 64);
  EXPECT_EQ(connects_completed(port_of(raised, false), 64, 300), 64);
  close(small);
  close(raised);
}

bool becomes_gone(ClientWatch& w) {
  for (int i = 0; i < 100; ++i) {
    if (w.gone()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ClientWatch, FindsTheServerSideSocketByItsAddresses) {
  Connection c;
  EXPECT_EQ(find_connection_socket("127.0.0.1", port_of(c.server, false), "127.0.0.1", port_of(c.server, true)), c.server);
  // The client's own socket has the same two addresses the other way round.
  EXPECT_EQ(find_connection_socket("127.0.0.1", port_of(c.client, false), "127.0.0.1", port_of(c.client, true)), c.client);
  EXPECT_EQ(find_connection_socket("127.0.0.1", port_of(c.server, false), "127.0.0.1", 1), -1);
}

TEST(ClientWatch, OpenConnectionIsNotGoneEvenWithBytesPending) {
  Connection c;
  ClientWatch w = c.watch();
  EXPECT_FALSE(w.gone());
  ASSERT_EQ(write(c.client, "GET", 3), 3);  // a pipelined request: the client is still there
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(w.gone());
}

TEST(ClientWatch, ClosedClientIsGone) {
  Connection c;
  ClientWatch w = c.watch();
  EXPECT_FALSE(w.gone());
  close(c.client);
  c.client = -1;
  EXPECT_TRUE(becomes_gone(w));
}

TEST(ClientWatch, UnknownConnectionIsNeverGone) {
  ClientWatch w("127.0.0.1", 1, "127.0.0.1", 2);
  EXPECT_FALSE(w.gone());
  EXPECT_FALSE(w.gone());
}

}  // namespace
}  // namespace minivllm::server

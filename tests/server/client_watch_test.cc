// ClientWatch against real loopback connections: it finds the server side's socket by the
// connection's addresses, says "not gone" while the client is connected (also with bytes pending),
// and "gone" once the client closed.
#include "server/client_watch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

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

// A listening socket on 127.0.0.1, a client connected to it, and the accepted server side.
struct Connection {
  int listener = -1, client = -1, server = -1;
  Connection() {
    listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listener, 4), 0);
    a.sin_port = htons(static_cast<uint16_t>(port_of(listener, false)));
    client = socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
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

bool becomes_gone(ClientWatch& w) {
  for (int i = 0; i < 100; ++i) {
    if (w.gone()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(ClientWatch, FindsTheServerSideSocketByItsAddresses) {
  Connection c;
  EXPECT_EQ(find_socket("127.0.0.1", port_of(c.server, false), "127.0.0.1", port_of(c.server, true)), c.server);
  // The client's own socket has the same two addresses the other way round.
  EXPECT_EQ(find_socket("127.0.0.1", port_of(c.client, false), "127.0.0.1", port_of(c.client, true)), c.client);
  EXPECT_EQ(find_socket("127.0.0.1", port_of(c.server, false), "127.0.0.1", 1), -1);
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

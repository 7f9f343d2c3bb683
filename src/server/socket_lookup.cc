#include "server/socket_lookup.h"

#include <dirent.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdlib>
#include <functional>

namespace minivllm::server {

namespace {

// (numeric host, port) of a socket address, as httplib's get_remote_ip_and_port writes them.
bool host_and_port(const sockaddr_storage& addr, socklen_t len, std::string& host, int& port) {
  char buf[NI_MAXHOST];
  char serv[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof buf, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  host = buf;
  port = std::atoi(serv);
  return true;
}

// One of getsockname / getpeername: false when it fails (not a socket, not connected).
bool address_of(int fd, bool peer, std::string& host, int& port) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return rc == 0 && host_and_port(addr, len, host, port);
}

// The first open descriptor of this process for which `match` holds, or -1.
int find_descriptor(const std::function<bool(int)>& match) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    if (match(static_cast<int>(fd))) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace

int find_connection_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                           int remote_port) {
  return find_descriptor([&](int fd) {
    std::string host;
    int port = -1;
    return address_of(fd, true, host, port) && port == remote_port && host == remote_addr &&
           address_of(fd, false, host, port) && port == local_port && host == local_addr;
  });
}

int find_listening_socket(int port) {
  return find_descriptor([port](int fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) return false;
    std::string host;
    int bound = -1;
    return address_of(fd, false, host, bound) && bound == port;
  });
}

bool raise_listen_backlog(int port, int backlog) {
  const int fd = find_listening_socket(port);
  return fd >= 0 && listen(fd, backlog) == 0;
}

}  // namespace minivllm::server

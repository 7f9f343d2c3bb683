// Finding httplib's sockets among this process's descriptors. httplib 0.11 (Debian's) hands out
// neither its listening socket nor a request's connection socket, and its listen backlog is
// compiled into the shared library as 5. These lookups let the server mend both from outside.
#pragma once

#include <string>

namespace minivllm::server {

// The connected TCP socket whose local and peer addresses are these (numeric host strings, as
// httplib writes them into Request::local_addr / remote_addr), or -1. The pair of addresses is
// unique among live connections.
int find_connection_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                           int remote_port);

// The listening TCP socket bound to this port, or -1.
int find_listening_socket(int port);

// Raises the listen backlog of the socket listening on `port` to `backlog` (Linux lets listen()
// be called again on a listening socket). With httplib's 5, a burst of clients overflows the
// accept queue: the kernel drops their SYNs, and each waits a 1 s (then 3 s, 7 s...) retransmit,
// or is reset. False when the socket was not found or listen() failed.
bool raise_listen_backlog(int port, int backlog);

}  // namespace minivllm::server

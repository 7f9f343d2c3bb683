// ClientWatch: whether the client of a request has hung up while its handler waits for the engine.
#pragma once

#include <string>

namespace minivllm::server {

// httplib 0.11 gives a handler neither its socket nor a closed-connection flag (later versions have
// Request::is_connection_closed). A streamed response notices a client that left when a write
// fails; a whole response writes nothing until the end, so without this its request would run to
// max_tokens for nobody. The socket is found once, by the connection's two addresses
// (socket_lookup.h); httplib closes it only after the handler
// returns, so the descriptor stays this connection's while the handler holds the watch. Then a
// non-blocking peek reads 0 bytes once the client's FIN arrived.
class ClientWatch {
 public:
  ClientWatch(std::string local_addr, int local_port, std::string remote_addr, int remote_port);

  // True once the client closed the connection (or it failed); false while it is open, and when the
  // socket could not be found (then nothing is known and the request runs to its end, as before).
  bool gone();

 private:
  std::string local_addr_, remote_addr_;
  int local_port_, remote_port_;
  int fd_ = -1;
  bool searched_ = false;
};

}  // namespace minivllm::server

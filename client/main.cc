// argen_client: command-line client of argen_server (see commands.h).
#include <unistd.h>

#include <iostream>

#include "client/commands.h"
#include "client/interrupt.h"

int main(int argc, char** argv) {
  argen::client::InstallInterruptHandler();  // before any thread starts
  std::vector<std::string> args(argv + 1, argv + argc);
  return argen::client::RunClient(args, std::cout, std::cerr, isatty(STDERR_FILENO) == 1);
}

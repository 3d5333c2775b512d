// nl_op_table: prints docs/nl-ops.md, the nl op -> dispatcher -> engine -> nisa instruction
// table, from the routing table in op_table.cc.
//   build/runtime/language/nl_op_table > docs/nl-ops.md
#include <cstdio>

#include "runtime/language/op_table.h"

int main() {
  std::fputs(nkisim::nl::OpTableMarkdown().c_str(), stdout);
  return 0;
}

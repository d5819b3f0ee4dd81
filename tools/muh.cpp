// muh — placeholder main, replaced by the CLI (tools/).
#include <cstdio>
int main() { std::puts("muh"); return 0; }

// minivllm command line: placeholder until the CLI lands.
int main() { return 0; }

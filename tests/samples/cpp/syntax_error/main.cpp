// A syntax error before any include, so the compiler fails fast.
int run(int x {
    return x +;
}

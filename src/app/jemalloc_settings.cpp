// jemalloc's settings for the binary (it reads this symbol at start; MALLOC_CONF overrides it).
// Freed pages stay with the process instead of going back to the kernel after a delay: the
// compute ranks free and allocate the same tensors every step, and returning them made the
// kernel fault and zero them again (the workstation demo's system time went from 6% of its CPU
// to 13%). What a rank frees is reused, so its resident memory stays at its peak, the largest
// temporary buffers included (glibc's returns blocks of 256 MiB or more: main.cpp's mallopt).
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}

// jemalloc's settings for the binary (it reads this symbol at start; MALLOC_CONF overrides it).
// Freed pages stay with the process instead of going back to the kernel after a delay: the
// compute ranks free and allocate the same tensors every step, and returning them made the
// kernel fault and zero them again (the workstation demo's system time went from 6% of its CPU
// to 13%). What a rank frees is reused, so its resident memory stays at its peak, the largest
// temporary buffers included (glibc's returns blocks of 256 MiB or more: main.cpp's mallopt).
// Any free extent serves any request: lg_extent_max_active_fit at its largest (the default, 6, lets a request
// take one at most 64 times its size, keeping large ones whole for purging, and nothing is purged here). Freed
// neighbours merged into extents of tens of MiB that the runners' generation tensors (16 KiB to a few MiB) could
// not use, so a runner took fresh memory step after step: the workstation demo's runners at up to 804 MiB after
// 200 steps (280,000 page faults in one), 197 MiB with this.
extern "C" {
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:63";
}

//! The binary's entry point (static x86-64 Linux builds): the writable segments are
//! filled in one system call before the C library relocates the program.
//!
//! cmdr is a static PIE, so before `main` the C library's start-up writes ~40k relocated
//! pointers across the RELRO segment (`.data.rel.ro`, `.got`, …; 170 pages). Taken one
//! page fault at a time, those copy-on-write faults cost a one-shot `cmdr exec` ~0.2 ms on
//! the machines measured: a fault costs 1.5–2.3 µs on a VM, a page populated by
//! `madvise(MADV_POPULATE_WRITE)` (Linux 5.14) ~0.7 µs (BENCHMARKS.md, X3). Every one of
//! those pages is written anyway, so nothing is copied that would not be.
//!
//! `cmdr_entry` (named the entry point by `build.rs`) reads the program headers through
//! `__ehdr_start`, asks the kernel to populate each writable `PT_LOAD` segment, and jumps
//! to the C library's `_start` with the registers and stack the kernel gave it. It runs
//! before relocation, so it is written in assembly and refers to nothing but
//! instruction-relative addresses. A kernel without the advice refuses it (`EINVAL`),
//! which is ignored: the pages then fault in as before.

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
std::arch::global_asm!(
    ".globl cmdr_entry",
    ".type cmdr_entry,@function",
    "cmdr_entry:",
    // rdx holds the dynamic linker's exit function for `_start`: kept in r12.
    "mov r12, rdx",
    // r13 = the ELF header, r14 = the program headers, r15 = their count.
    "lea r13, [rip + __ehdr_start]",
    "mov rax, [r13 + 32]", // e_phoff
    "lea r14, [r13 + rax]",
    "movzx r15d, word ptr [r13 + 56]", // e_phnum
    // r9 = the load bias: where the ELF header is, less the p_vaddr of the PT_LOAD that
    // maps it (file offset 0). Not PT_PHDR's: musl's static PIEs have none.
    "mov rcx, r15",
    "mov r8, r14",
    "2:",
    "test rcx, rcx",
    "jz 9f",                 // the header is in no PT_LOAD: leave it all to page faults
    "cmp dword ptr [r8], 1", // PT_LOAD
    "jne 6f",
    "cmp qword ptr [r8 + 8], 0", // p_offset
    "je 3f",
    "6:",
    "add r8, 56", // sizeof(Elf64_Phdr)
    "dec rcx",
    "jmp 2b",
    "3:",
    "mov r9, r13",
    "sub r9, [r8 + 16]", // p_vaddr
    // Each PT_LOAD with PF_W: madvise(page-aligned start, length, MADV_POPULATE_WRITE).
    "4:",
    "test r15, r15",
    "jz 9f",
    "cmp dword ptr [r14], 1", // PT_LOAD
    "jne 5f",
    "test dword ptr [r14 + 4], 2", // p_flags & PF_W
    "jz 5f",
    "mov rdi, [r14 + 16]", // p_vaddr
    "add rdi, r9",
    "mov rsi, [r14 + 40]", // p_memsz
    "mov rax, rdi",
    "and rax, 0xfff",
    "sub rdi, rax",
    "add rsi, rax",
    "add rsi, 0xfff",
    "and rsi, -4096",
    "mov edx, 23", // MADV_POPULATE_WRITE
    "mov eax, 28", // SYS_madvise; rcx and r11 are clobbered, the result ignored
    "syscall",
    "inc qword ptr [rip + {advised}]",
    "5:",
    "add r14, 56",
    "dec r15",
    "jmp 4b",
    "9:",
    "mov rdx, r12",
    "jmp _start",
    advised = sym ADVISED,
);

/// Writable segments the stub asked the kernel to populate (whatever the kernel answered):
/// none means it found no segment to advise, and every relocated page faults in alone.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
pub static ADVISED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg(all(
    test,
    target_arch = "x86_64",
    target_os = "linux",
    any(target_env = "musl", target_feature = "crt-static")
))]
mod tests {
    use nix::libc;

    extern "C" {
        /// The stub above.
        fn cmdr_entry();
    }

    /// The build names the stub as the entry point (a build script that stops doing so
    /// fails here, not only in the start-up bench).
    #[test]
    #[allow(unsafe_code)]
    fn the_program_starts_at_the_stub() {
        // SAFETY: reads the auxiliary vector the kernel gave this process.
        let entry = unsafe { libc::getauxval(libc::AT_ENTRY) } as usize;
        let stub: unsafe extern "C" fn() = cmdr_entry;
        assert_eq!(entry, stub as usize);
    }

    /// The stub found the writable segments, whatever headers the linker wrote (musl's
    /// static PIEs have no `PT_PHDR`, by which it once looked for them and found none).
    #[test]
    #[allow(unsafe_code)]
    fn the_stub_advised_every_writable_segment() {
        // SAFETY: the kernel's auxiliary vector names this process's program headers,
        // mapped for its whole life; they are read, in place, as the array they are.
        let headers = unsafe {
            let at = libc::getauxval(libc::AT_PHDR) as *const libc::Elf64_Phdr;
            std::slice::from_raw_parts(at, libc::getauxval(libc::AT_PHNUM) as usize)
        };
        let writable = headers
            .iter()
            .filter(|h| h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W != 0)
            .count() as u64;
        assert!(writable >= 1);
        let advised = super::ADVISED.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(advised, writable, "writable segments advised, of all");
    }
}

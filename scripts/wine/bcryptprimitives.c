/* ProcessPrng, which Rust's std (1.78 and later) takes from
 * bcryptprimitives.dll on Windows and which Wine 8 (Debian 12's) lacks: a
 * stand-in on RtlGenRandom, installed into the test's Wine prefix only, so
 * that the library's Windows tests can start under Wine. */
#include <windows.h>
#include <ntsecapi.h>

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x7fffffff ? 0x7fffffff : (ULONG)len;
        if (!RtlGenRandom(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}

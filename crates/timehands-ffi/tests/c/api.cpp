// api.cpp: include/timehands.h from C++, compiled by tests/c_api.rs with
// -std=c++11 -pedantic -Werror. A C++ program links the C functions (no name
// mangling) and fills the structs; the C tests (api.c) check the values.

#include <cerrno>
#include <cstdio>
#include <ctime>

#include <timehands.h>

int
main()
{
	struct timespec ts;
	if (th_clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		std::perror("th_clock_gettime");
		return 1;
	}
	errno = 0;
	if (th_clock_gettime(-1, &ts) != -1 || errno != EINVAL) {
		std::puts("th_clock_gettime(-1) was not refused with EINVAL");
		return 1;
	}
	struct th_info info;
	if (th_info(&info) != 0 || info.counter == nullptr) {
		std::puts("th_info failed");
		return 1;
	}
	char ctf[512];
	if (th_clock_description_ctf(ctf, sizeof ctf) <= 0) {
		std::puts("th_clock_description_ctf failed");
		return 1;
	}
	std::printf("C++: %s, %llu ns, %zu verdicts\n", info.counter,
	    static_cast<unsigned long long>(th_now_ns()), info.verdict_count);
	return 0;
}

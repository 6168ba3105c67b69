/*
 * The node's pause image: PID 1 of every Pod sandbox in the test suite's node. It holds the
 * sandbox's namespaces open, reaps the zombies that land on it when the Pod shares one PID
 * namespace, and exits on SIGINT or SIGTERM. Built with `gcc -static` by
 * scripts/build-test-images.sh, so the image needs no libc.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) {
    (void)sig;
    _exit(0);
}

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    if (getpid() != 1) {
        /* Still works, but nothing is reaped that is not our child. */
        write(2, "pause: not PID 1\n", 17);
    }
    struct sigaction stop = {.sa_handler = quit};
    struct sigaction child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    sigaction(SIGINT, &stop, NULL);
    sigaction(SIGTERM, &stop, NULL);
    sigaction(SIGCHLD, &child, NULL);
    for (;;) {
        pause();
    }
    return EXIT_FAILURE;
}

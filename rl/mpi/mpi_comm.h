// The few MPI pieces that Ape-X across ranks (rl/mpi/apex_mpi.cpp) uses, kept apart so the
// trainer reads as an algorithm: one session per process, collectives and waits that sleep
// between polls instead of spinning (ranks share cores), non-blocking sends that own their
// buffers, receiving the next message of any tag, a clock for heartbeats, and ending the job.
// Built only with MPI (LOOPTUNE_WITH_MPI); only rl/mpi/apex_mpi.cpp includes this header.
#pragma once

#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <list>
#include <string>
#include <thread>
#include <vector>

namespace looptune::mpi {

/// MPI_Init_thread(MPI_THREAD_FUNNELED) ... MPI_Finalize: only the thread that made it calls
/// MPI. One per process (MPI cannot be started twice); throws looptool::Error otherwise.
class Session {
public:
    Session();
    ~Session();
    Session(const Session &) = delete;
    Session &operator=(const Session &) = delete;
    int rank = 0, size = 1;
};

/// MPI_Bcast on MPI_COMM_WORLD, polling with short sleeps.
void bcast(void *data, int count, MPI_Datatype type, int root);

/// Every rank learns the lowest-ranked non-empty `mine` ("rank R: ..." when R > 0), or "".
std::string first_error(const Session &session, const std::string &mine);

/// The host names of all ranks, in rank order. LOOPTUNE_HOST_NAME, when set, replaces this
/// process's name: tests use it to play several hosts on one machine.
std::vector<std::string> host_names();

/// MPI_Barrier on MPI_COMM_WORLD, polling with short sleeps; false when some rank has not come
/// after `seconds` (the barrier is then left pending: call it only at the end of a job).
bool barrier(double seconds);

/// Non-blocking sends on MPI_COMM_WORLD; each buffer lives until its send completes.
class Outgoing {
public:
    void send(int dest, int tag, std::vector<char> bytes);
    /// Forgets the completed sends.
    void progress();
    size_t pending(int dest, int tag) const;
    /// Waits for every send; false when some are still pending after `seconds`.
    bool drain(double seconds);

private:
    struct Send {
        int dest, tag;
        std::vector<char> bytes;
        MPI_Request request;
    };
    std::list<Send> sends_;
};

/// The next message waiting from `source` (or MPI_ANY_SOURCE) with any tag, so that one rank's
/// messages come in the order it sent them; false when none is waiting.
bool try_receive(int source, int *from, int *tag, std::vector<char> *bytes);

/// How long each peer has been silent, counting only time this rank spent listening: a process
/// that was itself stopped or starved for a while does not blame the others for its own gap.
class SilenceClock {
public:
    explicit SilenceClock(int peers);
    /// Call at every poll, before receiving.
    void poll();
    void heard(int peer);
    double silent(int peer) const;

private:
    std::vector<double> last_heard_;
    double last_poll_;
};

/// Prints `error: message` and ends the whole job (MPI_Abort).
[[noreturn]] void abort_job(const std::string &message);

/// While it lives (one at a time), catches SIGTERM and calls `on_term` from a thread of its
/// own, which must end the process: the thread that would otherwise notice may be stuck in MPI
/// after a failed read from a dead rank, and mpirun sends SIGKILL a second after SIGTERM.
class SigtermWatch {
public:
    explicit SigtermWatch(std::function<void()> on_term);
    ~SigtermWatch();
    SigtermWatch(const SigtermWatch &) = delete;
    SigtermWatch &operator=(const SigtermWatch &) = delete;

private:
    struct sigaction old_ = {};
    std::atomic<bool> over_{false};
    std::thread watch_;
};

}  // namespace looptune::mpi

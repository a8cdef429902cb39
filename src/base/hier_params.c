#include "base/hier_params.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define HIER_PARAM_OFF(field) offsetof(hier_params_t, field)
#define HIER_ALGO_BIT(a) (1u << (a))

static const hier_param_desc_t hier_param_table[] = {
    {"priority", HIER_PARAM_INT, "0",
     "Priority of coll/hier; it is only selected when this beats the other components (tuned: 30; han: 35 on "
     "Open MPI 5, where it is on by default)",
     HIER_PARAM_OFF(priority), 0, 1, 1},
    {"verbose", HIER_PARAM_INT, "0",
     "Verbosity: 1 = one line per communicator (served or why not), 2 = also each rule a communicator's calls "
     "are chosen by, the first time (the rule's origin: built in, a rules file's line, a forced parameter), "
     "10 = one line per call",
     HIER_PARAM_OFF(verbose), 0, 1, 2},
    {"stats", HIER_PARAM_INT, "0",
     "1 = rank 0 of MPI_COMM_WORLD prints a coll:hier:stats line per (collective, path) at MPI_Finalize, and "
     "a coll:hier:nic line per NIC it drove (bytes written through it); 2 = every rank prints its coll:hier:nic "
     "lines too",
     HIER_PARAM_OFF(stats), 0, 1, 2},
    {"nonblocking", HIER_PARAM_INT, "1",
     "1 = hier serves MPI_Iallreduce, MPI_Iallgather and MPI_Ireduce_scatter(_block), and their persistent "
     "MPI_*_init, too, as requests its progress advances without waiting (a call that would wait first for a "
     "collective step only blocking calls take goes to the previous component: fallback:nonblocking); 0 = they "
     "all go to the previous component (libnbc)",
     HIER_PARAM_OFF(nonblocking), 0, 0, 4},
    {"nonblocking_setup", HIER_PARAM_INT, "1",
     "1 = a communicator whose first collective is nonblocking is set up without waiting: its exchanges with "
     "the peers are point-to-point messages the requests' progress tests, and the calls made meanwhile wait in "
     "its queue (served once it is set up); 0 = those calls go to the previous component until a blocking "
     "collective sets the communicator up (fallback:nonblocking)",
     HIER_PARAM_OFF(nonblocking_setup), 0, 0, 4},
    {"progress_thread", HIER_PARAM_INT, "-1",
     "-1 = 1 where a CPU is free for the thread (this process may run on more than one CPU, and the node's "
     "ranks are fewer than its CPUs), else 0. 1 = a thread of hier's advances the nonblocking and persistent requests while the application computes "
     "without calling MPI (it moves their data through shared memory, and between nodes through hier's own "
     "endpoint unless the MPI library drives libfabric itself, without locks; it leaves their completion, and "
     "whatever needs Open MPI (calls between nodes over its point-to-point among them), to the application's "
     "next MPI call); it sleeps while there is none. 2 = between nodes even then (Open MPI 4.1 with its ofi components "
     "loaded ran so; Open MPI 6.0 hung). Costs a core's share while requests run, and hier's transport lock",
     HIER_PARAM_OFF(progress_thread), 0, 1, 4},
    {"allreduce_algorithm", HIER_PARAM_ALGO, "auto",
     "Force the allreduce algorithm: auto, ll (low latency), flat (every rank reduces all "
     "slots), numa (two-level NUMA tree), rsag (pipelined reduce-scatter + allgather through the segment) or "
     "fallback (previous component)",
     HIER_PARAM_OFF(allreduce_algorithm),
     HIER_ALGO_BIT(HIER_ALGO_AUTO) | HIER_ALGO_BIT(HIER_ALGO_LL) | HIER_ALGO_BIT(HIER_ALGO_FLAT) |
         HIER_ALGO_BIT(HIER_ALGO_NUMA) | HIER_ALGO_BIT(HIER_ALGO_RSAG) | HIER_ALGO_BIT(HIER_ALGO_FALLBACK), 0, 4},
    {"allgather_algorithm", HIER_PARAM_ALGO, "auto",
     "Force the allgather algorithm: auto, ll (low latency), shm (copy through the segment), "
     "cma (single copy) or fallback",
     HIER_PARAM_OFF(allgather_algorithm),
     HIER_ALGO_BIT(HIER_ALGO_AUTO) | HIER_ALGO_BIT(HIER_ALGO_LL) | HIER_ALGO_BIT(HIER_ALGO_SHM) |
         HIER_ALGO_BIT(HIER_ALGO_CMA) | HIER_ALGO_BIT(HIER_ALGO_FALLBACK), 0, 4},
    {"reduce_scatter_algorithm", HIER_PARAM_ALGO, "auto",
     "Force the reduce_scatter(_block) algorithm: auto, ll (low latency), shm (through the "
     "segment) or fallback",
     HIER_PARAM_OFF(reduce_scatter_algorithm),
     HIER_ALGO_BIT(HIER_ALGO_AUTO) | HIER_ALGO_BIT(HIER_ALGO_LL) | HIER_ALGO_BIT(HIER_ALGO_SHM) |
         HIER_ALGO_BIT(HIER_ALGO_FALLBACK), 0, 4},
    {"allreduce_ll_max", HIER_PARAM_SIZE, "0",
     "Largest allreduce (bytes per rank) that auto sends through the low-latency path, where the data carries "
     "its own ready flag (at most about 8 KiB: above that the next algorithm serves). 0 = measured on the node: "
     "at the first allreduce from 1 KiB that the path could carry, the node's ranks time it against the "
     "schedule on 1-8 KiB (a millisecond or so, once per process and local rank count; coll_hier_verbose 1 "
     "logs the times); below 1 KiB it always serves",
     HIER_PARAM_OFF(allreduce_ll_max), 0, 0, 5},
    {"allgather_ll_max", HIER_PARAM_SIZE, "0",
     "Largest allgather (bytes per rank) that auto sends through the low-latency path; 0 = measured on the "
     "node, as allreduce_ll_max",
     HIER_PARAM_OFF(allgather_ll_max), 0, 0, 5},
    {"reduce_scatter_ll_max", HIER_PARAM_SIZE, "0",
     "Largest reduce_scatter (bytes of the whole send buffer) that auto sends through the low-latency path; "
     "0 = measured on the node, as allreduce_ll_max",
     HIER_PARAM_OFF(reduce_scatter_ll_max), 0, 0, 5},
    {"allreduce_flat_max", HIER_PARAM_SIZE, "2K",
     "Largest allreduce (bytes per rank) served by the flat or NUMA algorithm under auto, above the low-latency "
     "path; larger ones use rsag (on 2 ranks rsag wins from 2 KiB)",
     HIER_PARAM_OFF(allreduce_flat_max), 0, 0, 5},
    {"allreduce_numa_min_ranks", HIER_PARAM_SIZE, "4",
     "Under auto, small allreduces use the NUMA tree when the node has several NUMA domains and at least this many local ranks",
     HIER_PARAM_OFF(allreduce_numa_min_ranks), 0, 0, 5},
    {"shm_chunk_size", HIER_PARAM_SIZE, "256K",
     "Bytes per rank per pipeline buffer in the shared-memory segment (the segment holds 2 per rank); "
     "messages larger than this are pipelined through it",
     HIER_PARAM_OFF(shm_chunk_size), 0, 0, 5},
    {"spin_count", HIER_PARAM_INT, "2000",
     "Polls of a shared-memory flag before a waiting rank starts to yield the CPU and drive Open MPI progress",
     HIER_PARAM_OFF(spin_count), 0, 1, 6},
    {"timeout", HIER_PARAM_INT, "60",
     "Seconds any wait of hier (shared memory, network) may stand still before the call fails with an error "
     "naming who it waited for; the same clock everywhere, so a stuck or dead peer is reported by every rank "
     "within it. A peer process that exits is reported at once. 0 = wait for ever",
     HIER_PARAM_OFF(timeout), 0, 1, 3},
    {"shm_dir", HIER_PARAM_STRING, "",
     "Directory for the shared-memory segment; empty = POSIX shm_open (/dev/shm). The file is unlinked as soon "
     "as every local rank has mapped it",
     HIER_PARAM_OFF(shm_dir), 0, 1, 3},
    {"shm_budget", HIER_PARAM_SIZE, "512M",
     "Bytes of shared-memory segments one process keeps mapped at most, in use by its communicators or kept for "
     "the next ones: a communicator whose pipeline buffers would not fit uses smaller ones, down to the small "
     "buffers every node segment has; it never fails for lack of room",
     HIER_PARAM_OFF(shm_budget), 0, 1, 3},
    {"numa_ranks_per_domain", HIER_PARAM_INT, "0",
     "0 = NUMA domains from hwloc and each rank's binding; K > 0 = treat every K consecutive local ranks as one "
     "NUMA domain (testing and simulation of multi-socket nodes)",
     HIER_PARAM_OFF(numa_ranks_per_domain), 0, 0, 9},
    {"ranks_per_node", HIER_PARAM_INT, "0",
     "0 = nodes as Open MPI's locality reports them; K > 0 = split every host into virtual nodes of K consecutive "
     "MPI_COMM_WORLD ranks (experiments and simulation of multi-node runs)",
     HIER_PARAM_OFF(ranks_per_node), 0, 0, 9},
    {"allgather_cma_min", HIER_PARAM_SIZE, "0",
     "Under auto, allgathers with blocks (bytes per rank) in the single-copy window use single copy "
     "(process_vm_readv: each rank reads the others' blocks, one copy instead of two through the segment) when "
     "every local rank has a core of its own and the kernel allows it (probed once per communicator). This is "
     "the window's bottom; 0 = measured on the node (allgather_cma_max)",
     HIER_PARAM_OFF(allgather_cma_min), 0, 0, 5},
    {"allgather_cma_max", HIER_PARAM_SIZE, "0",
     "The single-copy window's top; 0 = measured on the node: at the first allgather that would use single copy, "
     "the node's ranks time both paths on blocks of 64K to 1M and 8M (tens of milliseconds, once per "
     "process and local rank count) and single copy serves the blocks from where it starts winning to where it stops "
     "(which path wins depends on the CPU and kernel; coll_hier_verbose 1 logs the times)",
     HIER_PARAM_OFF(allgather_cma_max), 0, 0, 5},
    {"rules", HIER_PARAM_STRING, "",
     "A rules file (docs/rules.md): which algorithm serves which calls, for the collectives and levels it "
     "names (the built-in rules for the others); empty = the built-in rules (contrib/rules/builtin.rules). "
     "A malformed file is refused, with its line, and the built-in rules serve. Every rank must have the same "
     "rules (the file's path may differ: the ranks compare what they read)",
     HIER_PARAM_OFF(rules), 0, 1, 4},
    {"fabric_provider", HIER_PARAM_STRING, "",
     "libfabric provider between nodes: efa, tcp (libfabric's native TCP endpoint: net in 1.17, tcp later), shm, "
     "sockets or a full name (tcp;ofi_rxm); empty = the first of efa, tcp, sockets that works. Without one, "
     "calls between nodes go over Open MPI's own point-to-point (paths pml_*), still hier's algorithms",
     HIER_PARAM_OFF(fabric_provider), 0, 0, 2},
    {"fabric_iface", HIER_PARAM_STRING, "",
     "NICs to use between nodes, by libfabric domain name (network interfaces for tcp, rdmap* devices for EFA): "
     "a comma list (like NCCL_IB_HCA / NCCL_SOCKET_IFNAME), or ^list to exclude; a trailing * matches a prefix. "
     "Empty = every NIC of the provider but lo and docker* (unless there is no other)",
     HIER_PARAM_OFF(fabric_iface), 0, 1, 2},
    {"fabric_profile", HIER_PARAM_STRING, "auto",
     "The rules hier keeps with the libfabric provider: auto (efa-direct's when the provider is EFA's efa-direct "
     "fabric, else the default), default, or efa-direct: on any provider, what efa-direct requires (FI_CONTEXT2 "
     "contexts, every buffer handed to the provider registered: FI_MR_LOCAL, checked at every write; control "
     "messages within the MTU; writes within FI_OPT_MAX_RMA_SIZE; no FI_RMA_EVENT; remote CQ data without "
     "posted receives), so a test bed without EFA runs under them",
     HIER_PARAM_OFF(fabric_profile), 0, 0, 3},
    {"fabric_rails_max", HIER_PARAM_INT, "4",
     "NICs (rails) one process drives at most: the node's NICs are shared out among its ranks, nearest first, "
     "every NIC serving as many ranks; with fewer ranks than NICs each drives several (at most 8)",
     HIER_PARAM_OFF(fabric_rails_max), 0, 1, 3},
    {"fabric_stripe", HIER_PARAM_INT, "1",
     "Spread the messages to a peer over every rail the two processes share (a message of half a slot or more "
     "cut in a segment per rail; consecutive messages and segments on different NICs); 0 = the first shared "
     "rail only. Ranks must agree (both ends cut a message alike)",
     HIER_PARAM_OFF(fabric_stripe), 0, 0, 3},
    {"fabric_warmup", HIER_PARAM_INT, "1",
     "Open libfabric once calls between nodes make it worth it (fabric_open_min; loading it and finding its "
     "providers takes 0.1-0.5 s): until every rank's endpoint is open, hier serves calls between nodes over "
     "Open MPI's own point-to-point (paths pml_*), then moves to libfabric at a call every rank agrees on. hier "
     "opens it in a thread of its own, so no call waits, unless the MPI library drives libfabric itself (an ofi "
     "MTL or BTL in use): then the call that asks opens it on MPI's thread, which that libfabric's user "
     "expects; 0 = the first call between nodes opens it and waits",
     HIER_PARAM_OFF(fabric_warmup), 0, 1, 3},
    {"fabric_open_min", HIER_PARAM_SIZE, "64K",
     "With fabric_warmup, libfabric starts opening at the first call between nodes of at least this many bytes "
     "(the whole vector: allreduce's, allgather's or reduce_scatter's), or at a communicator's 65,536th call "
     "between nodes; smaller calls before that go over Open MPI's point-to-point: the opening costs 0.1-0.5 s "
     "of a core, which a few small calls never pay back. 0 = at the first call",
     HIER_PARAM_OFF(fabric_open_min), 0, 1, 4},
    {"fabric_slot_size", HIER_PARAM_SIZE, "512K",
     "Bytes per message slot of an inter-node channel: larger messages are cut into slots of this size",
     HIER_PARAM_OFF(fabric_slot_size), 0, 0, 5},
    {"fabric_slots", HIER_PARAM_INT, "4",
     "Slots per inter-node channel and rail (lane) it uses: messages a sender may have in flight before the "
     "receiver returns credit",
     HIER_PARAM_OFF(fabric_slots), 0, 0, 5},
    {"net_algorithm", HIER_PARAM_ALGO, "auto",
     "Inter-node algorithm between the ranks of one local index: auto, ring (least data per round, 2 (nodes - 1) "
     "rounds), rd (recursive doubling: fewest rounds, the whole vector each) or rabenseifner (the ring's data "
     "in 2 log(nodes)/log(net_radix_max) rounds, any node count). Auto: allreduce takes rd up to net_rd_max "
     "(net_rd_max_two_nodes on two nodes), allgather on two nodes and, up to net_rd_max, on a power of two; "
     "reduce_scatter on two nodes takes the ring; otherwise rabenseifner when no node need be folded "
     "(net_radix_max), else rabenseifner while small (net_rd_max), the ring up to net_ring_max_nodes and the "
     "folded rabenseifner beyond",
     HIER_PARAM_OFF(net_algorithm),
     HIER_ALGO_BIT(HIER_ALGO_AUTO) | HIER_ALGO_BIT(HIER_ALGO_RING) | HIER_ALGO_BIT(HIER_ALGO_RD) |
         HIER_ALGO_BIT(HIER_ALGO_RH), 0, 4},
    {"net_rd_max", HIER_PARAM_SIZE, "16K",
     "Under auto, multi-node calls that move up to this many bytes between nodes (as net_split_min) are small: "
     "allreduce takes recursive doubling "
     "between nodes (fewest rounds, but log2(nodes) times the data; measured on three and four namespace nodes "
     "it wins at 16K and loses 1.5-4x at 64K), so does allgather on a power-of-two node count, and a node count "
     "that rabenseifner must fold takes it folded rather than the ring (allreduce on two nodes: "
     "net_rd_max_two_nodes)",
     HIER_PARAM_OFF(net_rd_max), 0, 0, 5},
    {"net_rd_max_two_nodes", HIER_PARAM_SIZE, "256K",
     "The same on two nodes, where recursive doubling moves no more data than rabenseifner, in one round instead "
     "of two, but each node reduces the whole vector instead of half; rabenseifner above",
     HIER_PARAM_OFF(net_rd_max_two_nodes), 0, 0, 5},
    {"net_radix_max", HIER_PARAM_INT, "8",
     "Rabenseifner's levels between nodes exchange with up to this many - 1 nodes at once (radix): nodes are "
     "numbered in mixed radix, each radix at most this, so a level costs one latency and log(nodes)/log(radix) "
     "levels do it all; a node count with a prime factor above it has its extra nodes folded in first (their "
     "data crosses the network twice). 2 is classic recursive halving and doubling",
     HIER_PARAM_OFF(net_radix_max), 0, 0, 5},
    {"net_ring_max_nodes", HIER_PARAM_INT, "16",
     "Under auto, above net_rd_max, node counts up to this one that rabenseifner could serve only by folding "
     "extra nodes (a prime factor above net_radix_max) take the ring, whose latency grows with the nodes but "
     "whose data crosses each link once; more nodes take the folded rabenseifner",
     HIER_PARAM_OFF(net_ring_max_nodes), 0, 0, 5},
    {"net_split_min", HIER_PARAM_SIZE, "16K",
     "Multi-node collectives that move this many bytes between nodes (the vector: allreduce's, allgather's "
     "result, reduce_scatter's send buffer) are split so every local rank drives the network with its own "
     "piece; smaller ones go through one rank per node. The vector, not the bytes per rank: at 1,000 nodes x 8 a "
     "64 MiB reduce_scatter is 8 KiB per rank, and served by one rank per node it is predicted 5.6 times "
     "slower (docs/model.md)",
     HIER_PARAM_OFF(net_split_min), 0, 0, 5},
    {"net_chunk_size", HIER_PARAM_SIZE, "1M",
     "Pipeline buffer per rank (as shm_chunk_size) for communicators that span nodes: each chunk is one "
     "round of inter-node messages, so larger chunks mean fewer, longer messages",
     HIER_PARAM_OFF(net_chunk_size), 0, 0, 5},
    {"net_pair_max", HIER_PARAM_SIZE, "64K",
     "Communicators of two nodes with one rank each: calls of at most this many bytes (the whole vector) go as "
     "one message each way from the caller's buffers, without the node level's segment, barriers and copies "
     "(results bit for bit the schedules'); larger ones, and every call with 0, take the schedules' run",
     HIER_PARAM_OFF(net_pair_max), 0, 0, 5},
    {"pipeline_depth", HIER_PARAM_INT, "0",
     "Chunks of a call between nodes whose network rounds are in flight at once (1-4; others are taken as the "
     "nearest; 0: by the provider, 4 on efa, 2 on the others): while chunk k's messages travel, chunks k+1 .. "
     "k+depth-1 are on the wire too and the next one copies its input in, so the rounds' latencies overlap "
     "instead of adding up; each rank's pipeline buffer holds depth+1 chunks (net_chunk_size each). Every depth "
     "measured the same over TCP here (CPUs drive the protocol); on EFA's 100 Gbit/s links 4 is predicted to "
     "keep the link busier (docs/model.md)",
     HIER_PARAM_OFF(pipeline_depth), 0, 0, 5},
    {"device_peer_direct", HIER_PARAM_INT, "1",
     "Device (accelerator) buffers of an allgather go NIC to NIC, registered with FI_HMEM, when the provider "
     "takes device memory (efa with FI_EFA_USE_DEVICE_RDMA=1; shm) and every rank's buffers are device memory; "
     "0 = always stage through host memory",
     HIER_PARAM_OFF(device_peer_direct), 0, 0, 4},
    {"device_peer_direct_min", HIER_PARAM_SIZE, "64K",
     "Device allgathers with blocks (bytes per rank) of this size or more consider peer direct (the ranks "
     "vote once per communicator); smaller ones are staged, which costs fewer round trips",
     HIER_PARAM_OFF(device_peer_direct_min), 0, 0, 5},
    {"device_force_staging", HIER_PARAM_INT, "0",
     "1 = every device buffer goes through host memory, even where peer direct is possible",
     HIER_PARAM_OFF(device_force_staging), 0, 0, 5},
    {"device_stage_chunk", HIER_PARAM_SIZE, "1M",
     "Staging pipeline chunk: device data is copied to and from pinned host memory in chunks of about this "
     "size, the copies of one chunk overlapping the collective on the previous one",
     HIER_PARAM_OFF(device_stage_chunk), 0, 0, 5},
};

hier_params_t hier_params;

static const char *const hier_algo_names[HIER_ALGO_COUNT] = {
    [HIER_ALGO_AUTO] = "auto", [HIER_ALGO_FLAT] = "flat", [HIER_ALGO_NUMA] = "numa",
    [HIER_ALGO_RSAG] = "rsag", [HIER_ALGO_FALLBACK] = "fallback", [HIER_ALGO_SHM] = "shm",
    [HIER_ALGO_CMA] = "cma", [HIER_ALGO_LL] = "ll", [HIER_ALGO_RING] = "ring", [HIER_ALGO_RD] = "rd",
    [HIER_ALGO_RH] = "rabenseifner",
};

const char *hier_algo_name(hier_algo_t algo)
{
    return (unsigned)algo < HIER_ALGO_COUNT ? hier_algo_names[algo] : "unknown";
}

const hier_param_desc_t *hier_params_table(size_t *count_p)
{
    *count_p = sizeof(hier_param_table) / sizeof(hier_param_table[0]);
    return hier_param_table;
}

int hier_params_parse_size(const char *text, size_t *value_p)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text) return -1;
    switch (*end) {
    case 'K': case 'k': v <<= 10; end++; break;
    case 'M': case 'm': v <<= 20; end++; break;
    case 'G': case 'g': v <<= 30; end++; break;
    default: break;
    }
    if (*end) return -1;
    *value_p = (size_t)v;
    return 0;
}

static int hier_params_parse_algo(const char *text)
{
    for (unsigned a = 0; a < HIER_ALGO_COUNT; a++)
        if (!strcmp(text, hier_algo_names[a])) return (int)a;
    return -1;
}

/* One parameter from its text, checked the way the glue's registration
 * checks it (an algorithm outside the parameter's mask is refused). */
static int hier_params_set_desc(hier_params_t *params, const hier_param_desc_t *d, const char *text)
{
    char *field = (char *)params + d->offset, *end;
    long v;
    switch (d->type) {
    case HIER_PARAM_INT:
        errno = 0;
        v = strtol(text, &end, 10);
        if (errno || end == text || *end || v < INT_MIN || v > INT_MAX) return -1;
        *(int *)field = (int)v;
        return 0;
    case HIER_PARAM_SIZE: return hier_params_parse_size(text, (size_t *)field);
    case HIER_PARAM_ALGO:
        v = hier_params_parse_algo(text);
        if (v < 0 || !(d->algo_mask & (1u << v))) return -1;
        *(int *)field = (int)v;
        return 0;
    case HIER_PARAM_STRING: *(const char **)field = text; return 0;
    }
    return -1;
}

void hier_params_defaults(hier_params_t *params)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    memset(params, 0, sizeof(*params));
    for (size_t i = 0; i < n; i++) hier_params_set_desc(params, &t[i], t[i].defval);
}

int hier_params_set(hier_params_t *params, const char *name, const char *text)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name)) return hier_params_set_desc(params, &t[i], text);
    return -1;
}

void hier_params_print_markdown(FILE *out)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    fprintf(out, "| parameter | default | level | ranks | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++)
        fprintf(out, "| `coll_hier_%s` | `%s` | %d | %s | %s |\n", t[i].name, t[i].defval[0] ? t[i].defval : "\"\"",
                t[i].level, t[i].local ? "may differ" : "agree", t[i].help);
}

/* A digest of the values that shape schedules and protocols: every rank of
 * a communicator must have the same, or they would run different steps.
 * Each set-up takes it (its record carries it): a field at a time, mixed as
 * a 64-bit word (a byte at a time, 44 fields cost 0.15 us of a one-node
 * dup + first call + free of 5.7); strings by FNV-1a, byte by byte. */
static uint64_t hier_params_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

uint32_t hier_params_digest(const hier_params_t *params)
{
    size_t n;
    const hier_param_desc_t *t = hier_params_table(&n);
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < n; i++) {
        const char *at = (const char *)params + t[i].offset;
        if (t[i].local) continue;
        if (t[i].type == HIER_PARAM_STRING) {
            const char *str = *(char *const *)at ? *(char *const *)at : "";
            uint64_t f = 14695981039346656037ull;
            for (const unsigned char *b = (const unsigned char *)str; *b; b++) f = (f ^ *b) * 1099511628211ull;
            h = hier_params_mix(h, f);
        } else if (t[i].type == HIER_PARAM_SIZE) {
            h = hier_params_mix(h, *(const size_t *)at);
        } else {
            h = hier_params_mix(h, (uint64_t)(uint32_t) * (const int *)at);
        }
    }
    return (uint32_t)(h ^ (h >> 32));
}

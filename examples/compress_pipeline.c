/* Compressing a file in chunks with a linear pipeline (fsched_parallel_pipeline), the
   way a parallel gzip does it: a serial stage reads the input chunk by chunk, in order; a
   parallel stage compresses any number of chunks at once; a serial stage writes the
   compressed chunks in input order, whatever order they were compressed in. The "file"
   is a few MiB of generated log text, and the compressor a small LZ77-style one written
   below, with a decompressor to check the result.

   What it shows:
   - stages: fsched_stage with a mode (FSCHED_STAGE_SERIAL_IN_ORDER, FSCHED_STAGE_PARALLEL),
     a function that takes the item the stage before returned and returns the item for
     the next one (the first stage makes the items and says when to stop), and a name
     for fsched_parallel_pipeline_run's log and stall reports;
   - max_in_flight: at most that many chunks are between being read and being written,
     which bounds the memory: here a ring of that many chunk buffers, reused in turn, is
     all the pipeline needs, and the program checks that no buffer is reused too early;
   - that fsched_parallel_pipeline must be called from a task or a bound thread: this
     program binds its main thread to the scheduler (fsched_bind), which then helps to
     run the stages while it waits.

   The output is decompressed serially and compared with the input; the pipeline's output
   must also be byte for byte the same as compressing the chunks one after the other,
   which is timed as well, for the speed-up.

   Build: cc -O2 -pthread examples/compress_pipeline.c -o compress_pipeline */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INPUT_SIZE (6u << 20) /* bytes of generated text */
#define CHUNK_SIZE (64u << 10) /* bytes read, and compressed, at a time */
#define IN_FLIGHT 8            /* chunks between the input and output stages at most */
#define RUNS 5                 /* each way; the best time counts */

/* ---- a small LZ77-style compressor ----
   The compressed form of a chunk is a sequence of tokens, each starting with a byte t:
     t < 128:  a run of t + 1 literal bytes, which follow;
     t >= 128: a match: copy (t - 128) + MIN_MATCH bytes from `offset` bytes back in the
               output (offset in the next two bytes, little-endian, 1..65535); a match
               may overlap the bytes it produces (offset 1 repeats one byte).
   Each chunk is compressed on its own, so chunks can be compressed in parallel and
   matches never reach into another chunk. Candidates come from a hash table of the last
   position where each 4-byte sequence was seen. */

#define MIN_MATCH 4
#define MAX_MATCH (MIN_MATCH + 127)
#define MAX_LITERALS 128
#define MAX_OFFSET 65535u
#define HASH_BITS 14
#define HASH_SIZE (1u << HASH_BITS)

/* Bytes a compressed chunk of n bytes may take: all literals, one tag per 128. */
#define COMPRESS_BOUND(n) ((n) + (n) / MAX_LITERALS + 1)

/* Each chunk is framed by two 32-bit little-endian sizes: its size before and after. */
#define FRAME_HEADER 8

static uint32_t hash4(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return (v * 2654435761u) >> (32 - HASH_BITS);
}

/* Writes literal runs for n bytes at `bytes`; returns the bytes written. */
static size_t emit_literals(const uint8_t *bytes, size_t n, uint8_t *out) {
    size_t written = 0;
    while (n > 0) {
        size_t run = n < MAX_LITERALS ? n : MAX_LITERALS;
        out[written++] = (uint8_t)(run - 1);
        memcpy(out + written, bytes, run);
        written += run;
        bytes += run;
        n -= run;
    }
    return written;
}

/* Compresses in[0..n) into out (room for COMPRESS_BOUND(n) bytes); `table` is scratch of
   HASH_SIZE entries, which holds a position + 1 (0: none yet). Returns the compressed
   size. */
static size_t lz_compress(const uint8_t *in, size_t n, uint8_t *out, uint32_t *table) {
    size_t pos = 0, literals_from = 0, written = 0;
    memset(table, 0, HASH_SIZE * sizeof *table);
    while (pos + MIN_MATCH <= n) {
        uint32_t h = hash4(in + pos);
        size_t candidate = table[h];
        table[h] = (uint32_t)(pos + 1);
        if (candidate && pos - (candidate - 1) <= MAX_OFFSET &&
            memcmp(in + candidate - 1, in + pos, MIN_MATCH) == 0) {
            size_t from = candidate - 1, length = MIN_MATCH, offset = pos - from;
            while (pos + length < n && length < MAX_MATCH &&
                   in[from + length] == in[pos + length])
                length++;
            written += emit_literals(in + literals_from, pos - literals_from, out + written);
            out[written++] = (uint8_t)(128 + length - MIN_MATCH);
            out[written++] = (uint8_t)(offset & 0xff);
            out[written++] = (uint8_t)(offset >> 8);
            pos += length;
            literals_from = pos;
        } else {
            pos++;
        }
    }
    return written + emit_literals(in + literals_from, n - literals_from, out + written);
}

/* Decompresses in[0..n) into out (room for out_size bytes). Returns the decompressed
   size, or (size_t)-1 for malformed input. */
static size_t lz_decompress(const uint8_t *in, size_t n, uint8_t *out, size_t out_size) {
    size_t i = 0, written = 0;
    while (i < n) {
        unsigned tag = in[i++];
        if (tag < 128) {
            size_t run = tag + 1u;
            if (run > n - i || run > out_size - written) return (size_t)-1;
            memcpy(out + written, in + i, run);
            i += run;
            written += run;
        } else {
            size_t length = tag - 128u + MIN_MATCH, offset, k;
            if (n - i < 2) return (size_t)-1;
            offset = in[i] | (size_t)in[i + 1] << 8;
            i += 2;
            if (offset == 0 || offset > written || length > out_size - written)
                return (size_t)-1;
            for (k = 0; k < length; k++, written++) out[written] = out[written - offset];
        }
    }
    return written;
}

static void put_u32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_u32(const uint8_t *p) {
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Decompresses a whole output (frames one after the other) into out, which has room for
   out_size bytes. Returns the decompressed size, or (size_t)-1 for malformed input. */
static size_t decompress_all(const uint8_t *in, size_t n, uint8_t *out, size_t out_size) {
    size_t i = 0, written = 0;
    while (i < n) {
        size_t raw_size, packed_size;
        if (n - i < FRAME_HEADER) return (size_t)-1;
        raw_size = get_u32(in + i);
        packed_size = get_u32(in + i + 4);
        i += FRAME_HEADER;
        if (packed_size > n - i || raw_size > out_size - written ||
            lz_decompress(in + i, packed_size, out + written, raw_size) != raw_size)
            return (size_t)-1;
        i += packed_size;
        written += raw_size;
    }
    return written;
}

/* ---- the input: log lines, with enough repetition to compress and enough noise not
   to compress too well ---- */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint32_t next_random(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 32);
}

static void generate_log(uint8_t *text, size_t size) {
    static const char *const levels[] = {"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"};
    static const char *const components[] = {"auth",  "db",        "cache",   "http",
                                             "queue", "scheduler", "storage", "mailer"};
    char line[160];
    size_t filled = 0;
    uint32_t seconds = 8 * 3600;
    while (filled < size) {
        const char *level = levels[next_random() % 6];
        const char *component = components[next_random() % 8];
        uint32_t a = next_random() % 100000, b = next_random() % 1000;
        int n = snprintf(line, sizeof line, "2024-05-17 %02u:%02u:%02u.%03u %-5s %-9s ",
                         (unsigned)(seconds / 3600 % 24), (unsigned)(seconds / 60 % 60),
                         (unsigned)(seconds % 60), (unsigned)(next_random() % 1000), level,
                         component);
        char *message = line + n;
        size_t room = sizeof line - (size_t)n, len;
        seconds += next_random() % 3;
        switch (next_random() % 5) {
        case 0:
            n += snprintf(message, room, "request %u served in %u ms\n", (unsigned)a,
                          (unsigned)b);
            break;
        case 1:
            n += snprintf(message, room, "connection from 10.0.%u.%u accepted\n",
                          (unsigned)(a % 256), (unsigned)(b % 256));
            break;
        case 2:
            n += snprintf(message, room, "cache miss for key user:%u:profile\n", (unsigned)a);
            break;
        case 3:
            n += snprintf(message, room, "retrying job %u after %u ms\n", (unsigned)a,
                          (unsigned)b);
            break;
        default:
            n += snprintf(message, room, "session %u expired\n", (unsigned)a);
        }
        len = (size_t)n < size - filled ? (size_t)n : size - filled;
        memcpy(text + filled, line, len);
        filled += len;
    }
}

/* ---- the pipeline ---- */

/* One chunk in flight: its bytes as read, compressed, and the compressor's scratch. The
   pipeline's items are pointers to these. */
typedef struct chunk_slot {
    atomic_int in_use;     /* between the input stage and the output stage */
    uint8_t raw[CHUNK_SIZE];
    size_t raw_size;
    uint8_t packed[COMPRESS_BOUND(CHUNK_SIZE)];
    size_t packed_size;
    uint32_t table[HASH_SIZE];
} chunk_slot;

typedef struct compress_job {
    const uint8_t *input; /* the "file" */
    size_t input_size;
    size_t read_pos;      /* input stage only */
    uint64_t chunks_read; /* input stage only: picks the slot */
    chunk_slot *slots;    /* IN_FLIGHT of them, used in turn */
    uint8_t *output;
    size_t output_size;   /* output stage only */
    atomic_int in_flight; /* chunks read and not yet written */
    int peak_in_flight;   /* input stage only */
    int reused_too_early; /* a slot was still in use when its turn came again */
} compress_job;

/* Stage 1, serial in order: "reads" the next chunk. Called with item NULL; returns the
   item for the next stage, or sets *stop when the input has ended. Being serial, it can
   keep its position in the job without a lock. */
static void *read_chunk(void *user, void *item, int *stop) {
    compress_job *job = (compress_job *)user;
    chunk_slot *slot;
    size_t n;
    int in_flight;
    (void)item;
    if (job->read_pos == job->input_size) {
        *stop = 1;
        return NULL;
    }
    /* At most IN_FLIGHT chunks are past this stage and not yet past the last one, which
       writes them in input order. So when chunk k is read, chunk k - IN_FLIGHT has been
       written and its slot is free again. */
    slot = &job->slots[job->chunks_read % IN_FLIGHT];
    if (atomic_exchange(&slot->in_use, 1)) {
        job->reused_too_early = 1;
        *stop = 1;
        return NULL;
    }
    n = job->input_size - job->read_pos < CHUNK_SIZE ? job->input_size - job->read_pos
                                                     : CHUNK_SIZE;
    memcpy(slot->raw, job->input + job->read_pos, n); /* the read */
    slot->raw_size = n;
    job->read_pos += n;
    job->chunks_read++;
    in_flight = atomic_fetch_add(&job->in_flight, 1) + 1;
    if (in_flight > job->peak_in_flight) job->peak_in_flight = in_flight;
    return slot;
}

/* Stage 2, parallel: compresses a chunk. Any number of these run at once, each on its own
   slot, so nothing here is shared. */
static void *compress_chunk(void *user, void *item, int *stop) {
    chunk_slot *slot = (chunk_slot *)item;
    (void)user;
    (void)stop;
    slot->packed_size = lz_compress(slot->raw, slot->raw_size, slot->packed, slot->table);
    return slot;
}

/* Stage 3, serial in order: appends the compressed chunk, framed, to the output. Chunks
   come here in the order they were read. Its return value goes nowhere. */
static void *write_chunk(void *user, void *item, int *stop) {
    compress_job *job = (compress_job *)user;
    chunk_slot *slot = (chunk_slot *)item;
    uint8_t *out = job->output + job->output_size;
    (void)stop;
    put_u32(out, (uint32_t)slot->raw_size);
    put_u32(out + 4, (uint32_t)slot->packed_size);
    memcpy(out + FRAME_HEADER, slot->packed, slot->packed_size);
    job->output_size += FRAME_HEADER + slot->packed_size;
    atomic_fetch_sub(&job->in_flight, 1);
    atomic_store(&slot->in_use, 0); /* the slot may be read into again */
    return NULL;
}

/* The same work, one chunk after the other, for the check and the speed-up. */
static size_t compress_serially(const uint8_t *input, size_t size, uint8_t *output,
                                uint32_t *table) {
    size_t pos = 0, written = 0;
    while (pos < size) {
        size_t n = size - pos < CHUNK_SIZE ? size - pos : CHUNK_SIZE;
        size_t packed =
            lz_compress(input + pos, n, output + written + FRAME_HEADER, table);
        put_u32(output + written, (uint32_t)n);
        put_u32(output + written + 4, (uint32_t)packed);
        written += FRAME_HEADER + packed;
        pos += n;
    }
    return written;
}

static int check(fsched_result r, const char *what) {
    if (r == FSCHED_OK) return 1;
    fprintf(stderr, "%s: %s\n", what, fsched_result_string(r));
    return 0;
}

static double ms_since(uint64_t t0) { return (double)(fsched_clock_ns() - t0) / 1e6; }

int main(void) {
    const size_t chunks = (INPUT_SIZE + CHUNK_SIZE - 1) / CHUNK_SIZE;
    const size_t output_capacity = chunks * (FRAME_HEADER + COMPRESS_BOUND(CHUNK_SIZE));
    uint8_t *input = (uint8_t *)malloc(INPUT_SIZE);
    uint8_t *serial_output = (uint8_t *)malloc(output_capacity);
    uint8_t *output = (uint8_t *)malloc(output_capacity);
    uint8_t *restored = (uint8_t *)malloc(INPUT_SIZE);
    chunk_slot *slots = (chunk_slot *)calloc(IN_FLIGHT, sizeof *slots);
    compress_job job;
    /* Read, compress, write. Every stage gets the job as its `user` pointer. */
    const fsched_stage stages[3] = {
        {FSCHED_STAGE_SERIAL_IN_ORDER, read_chunk, &job, "read"},
        {FSCHED_STAGE_PARALLEL, compress_chunk, &job, "compress"},
        {FSCHED_STAGE_SERIAL_IN_ORDER, write_chunk, &job, "write"},
    };
    fsched_sched *sched;
    size_t serial_size = 0, restored_size, i;
    double serial_ms = 0, pipeline_ms = 0, ms, decompress_ms;
    uint64_t t0;
    int run, ok = 1;

    if (!input || !serial_output || !output || !restored || !slots) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (i = 0; i < IN_FLIGHT; i++) atomic_init(&slots[i].in_use, 0);
    generate_log(input, INPUT_SIZE);
    printf("input: %u bytes of generated log text, %zu chunks of %u bytes\n",
           (unsigned)INPUT_SIZE, chunks, (unsigned)CHUNK_SIZE);

    for (run = 0; run < RUNS; run++) {
        t0 = fsched_clock_ns();
        serial_size = compress_serially(input, INPUT_SIZE, serial_output, slots[0].table);
        ms = ms_since(t0);
        if (run == 0 || ms < serial_ms) serial_ms = ms;
    }

    /* One worker per CPU. fsched_parallel_pipeline needs a task or a bound thread of the
       scheduler: bound, this thread runs stages too while it waits for the pipeline. */
    if (!check(fsched_create(NULL, &sched), "fsched_create")) return 1;
    if (!check(fsched_bind(sched), "fsched_bind")) return 1;
    for (run = 0; run < RUNS && ok; run++) {
        job.input = input;
        job.input_size = INPUT_SIZE;
        job.read_pos = 0;
        job.chunks_read = 0;
        job.slots = slots;
        job.output = output;
        job.output_size = 0;
        atomic_init(&job.in_flight, 0);
        job.peak_in_flight = 0;
        job.reused_too_early = 0;
        t0 = fsched_clock_ns();
        /* Returns once the first stage has stopped and every chunk has been written. */
        ok = check(fsched_parallel_pipeline(IN_FLIGHT, stages, 3), "fsched_parallel_pipeline");
        ms = ms_since(t0);
        if (run == 0 || ms < pipeline_ms) pipeline_ms = ms;
        if (ok && job.reused_too_early) {
            fprintf(stderr, "a chunk slot was read into while still in flight\n");
            ok = 0;
        }
        if (ok && job.peak_in_flight > IN_FLIGHT) {
            fprintf(stderr, "%d chunks were in flight, more than %d\n", job.peak_in_flight,
                    IN_FLIGHT);
            ok = 0;
        }
    }
    if (!check(fsched_unbind(), "fsched_unbind")) return 1;

    if (ok) {
        printf("compressed: %zu bytes, %.1f%% of the input (ratio %.2f)\n", job.output_size,
               100.0 * (double)job.output_size / INPUT_SIZE,
               (double)INPUT_SIZE / (double)job.output_size);
        printf("serially: %.1f ms (%.0f MiB/s)\n", serial_ms,
               INPUT_SIZE / (1024.0 * 1024.0) / (serial_ms / 1e3));
        printf("pipeline: %.1f ms on %u workers and this thread, %.2fx as fast; at most %d "
               "chunks in flight, %d at the peak\n",
               pipeline_ms, (unsigned)fsched_worker_count(sched), serial_ms / pipeline_ms,
               IN_FLIGHT, job.peak_in_flight);
        printf("(times: the best of %d runs each)\n", RUNS);
    }
    if (!check(fsched_destroy(sched), "fsched_destroy")) return 1;

    if (ok &&
        (job.output_size != serial_size || memcmp(output, serial_output, serial_size) != 0)) {
        fprintf(stderr, "the pipeline's output differs from compressing serially\n");
        ok = 0;
    }
    if (ok) {
        t0 = fsched_clock_ns();
        restored_size = decompress_all(output, job.output_size, restored, INPUT_SIZE);
        decompress_ms = ms_since(t0);
        if (restored_size != INPUT_SIZE || memcmp(restored, input, INPUT_SIZE) != 0) {
            fprintf(stderr, "decompressing did not give the input back\n");
            ok = 0;
        } else {
            printf("decompressed serially in %.1f ms: the input, byte for byte\n",
                   decompress_ms);
        }
    }

    free(input);
    free(serial_output);
    free(output);
    free(restored);
    free(slots);
    return ok ? 0 : 1;
}

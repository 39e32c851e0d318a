/* Word frequencies of a few hundred generated documents, with the C++ layer, as a graph
   of three tasks: the first generates the documents with a parallel_for; then two run
   side by side. One counts each document in a task of a wait group, which merges its
   counts into the shared table under an fsched::mutex. The other checks it: a
   parallel_reduce whose accumulators are tables, merged in document order, joined with
   a serial count. One document holds a word that is not a word: its task throws, the
   wait group's wait rethrows that, which fails its graph task, and the graph's wait
   rethrows it in main once the whole run has ended. The main thread is bound to the
   scheduler meanwhile (bind_guard), so that its wait runs tasks too.

   Build: c++ -O2 -pthread examples/cpp_tasks.cpp -o cpp_tasks */
#define FIBERSCHED_IMPLEMENTATION
#include "../fibersched.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

typedef std::map<std::string, long> word_counts;

static const std::size_t documents = 400, words_per_document = 5000, malformed = 123;

/* Document i, the same on every run: words from a small vocabulary, more often the first
   ones; the malformed document holds a word with a digit. */
static std::string make_document(std::size_t i) {
    static const char *const vocabulary[] = {"fiber",  "task", "worker", "steal",  "join",
                                             "wait",   "mutex", "event", "lambda", "deque"};
    std::uint64_t state = 0x9e3779b97f4a7c15ull * (i + 1);
    std::string text;
    for (std::size_t w = 0; w < words_per_document; w++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        std::size_t r = (std::size_t)(state >> 33) % 100;
        text += vocabulary[r < 50 ? r % 3 : r % 10];
        text += w % 12 == 11 ? '\n' : ' ';
    }
    if (i == malformed) text += "w0rd\n";
    return text;
}

/* Counts the words of one document; throws when a word has anything but letters. */
static void count_words(const std::string &text, std::size_t index, word_counts &out) {
    std::size_t i = 0;
    while (i < text.size()) {
        std::size_t end = text.find_first_of(" \n", i);
        if (end == std::string::npos) end = text.size();
        std::string word = text.substr(i, end - i);
        for (char c : word)
            if (!std::isalpha((unsigned char)c))
                throw std::invalid_argument("document " + std::to_string(index) + ": '" +
                                            word + "' is not a word");
        if (!word.empty()) out[word]++;
        i = end + 1;
    }
}

/* Adds the counts of one table into another. */
static void merge_into(word_counts &into, const word_counts &from) {
    for (const auto &entry : from) into[entry.first] += entry.second;
}

int main() {
    fsched::scheduler sched;
    if (sched.create() != FSCHED_OK) return 1; // one worker per CPU
    fsched::bind_guard bound(sched); // throws std::system_error when the bind fails

    std::vector<std::string> docs(documents);
    word_counts counts, reduced, reference;
    fsched::mutex counts_lock;
    std::string rejected;

    auto generate = [&] {
        // one call per index; a status for the graph (0: success)
        return fsched::parallel_for(0, documents, 1,
                                    [&](std::size_t i) { docs[i] = make_document(i); });
    };
    auto count_in_tasks = [&] {
        fsched::wait_group group;
        for (std::size_t i = 0; i < documents; i++) {
            fsched_result spawned = group.spawn(sched, [&, i] {
                word_counts local; // counted alone, merged under the lock
                count_words(docs[i], i, local);
                std::lock_guard<fsched::mutex> guard(counts_lock);
                merge_into(counts, local);
            });
            if (spawned != FSCHED_OK) throw std::runtime_error(fsched_result_string(spawned));
        }
        (void)group.wait(); // rethrows the first exception of the group's tasks
    };
    auto count_by_reduction = [&] {
        auto count_one = [&](std::size_t i, word_counts &acc) {
            word_counts local;
            try {
                count_words(docs[i], i, local);
            } catch (const std::invalid_argument &) {
                return; // the malformed document is left out of the checks
            }
            merge_into(acc, local);
        };
        auto merge = [](word_counts &acc, word_counts &&other) { merge_into(acc, other); };
        if (fsched::parallel_reduce(0, documents, 8, word_counts(), count_one, merge, reduced) !=
            FSCHED_OK)
            throw std::runtime_error("parallel_reduce failed");
    };
    auto count_serially = [&] {
        for (std::size_t i = 0; i < documents; i++) {
            word_counts local;
            try {
                count_words(docs[i], i, local);
            } catch (const std::invalid_argument &) {
                continue;
            }
            merge_into(reference, local);
        }
    };
    auto check = [&] { return fsched::join(count_by_reduction, count_serially); };

    fsched::graph graph;
    fsched_graph_task *generated, *counted, *checked;
    if (graph.create() != FSCHED_OK || graph.add(generate, &generated, "generate") != FSCHED_OK ||
        graph.add(count_in_tasks, &counted, "count") != FSCHED_OK ||
        graph.add(check, &checked, "check") != FSCHED_OK ||
        graph.precede(generated, counted) != FSCHED_OK ||
        graph.precede(generated, checked) != FSCHED_OK || graph.run(sched) != FSCHED_OK)
        return 1;
    try {
        (void)graph.wait();
    } catch (const std::invalid_argument &e) {
        rejected = e.what(); // thrown by a task of the group, passed on by two waits
    }

    long total = 0;
    const word_counts::value_type *most = nullptr;
    for (const auto &entry : counts) {
        total += entry.second;
        if (!most || entry.second > most->second) most = &entry;
    }
    std::printf("%ld words in %zu documents, %zu different; most frequent: '%s' (%ld)\n",
                total, documents - 1, counts.size(), most ? most->first.c_str() : "",
                most ? most->second : 0L);
    std::printf("rejected: %s\n", rejected.c_str());
    bool ok = counts == reference && reduced == reference &&
              total == (long)((documents - 1) * words_per_document) &&
              rejected == "document 123: 'w0rd' is not a word";
    std::printf("%s\n", ok ? "ok: both parallel counts equal the serial one" : "WRONG RESULT");
    return ok ? 0 : 1;
}

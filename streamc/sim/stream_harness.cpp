// Streams frames through a Verilated accelerator top without a Python call per cycle.
//
// Built with the design by streamc.sim.harness (verilator --cc --exe --build --prefix Vtop) and run in a
// folder holding the files streamc.sim.runner writes: config.txt ("key value" lines), frames.bin (every
// input beat as little-endian 32-bit words, element j of a beat at bits [j*width, (j+1)*width)). It
// writes outputs.bin and rerun_outputs.bin in the same layout, and result.json with what happened; the
// runner turns these into its result, so both engines (this one and the cocotb testbench
// streamc/sim/stream_tb.py) are judged by the same Python.
//
// Each cycle follows the cocotb testbench: the input and output handshake signals are driven after the
// rising edge, the handshakes are sampled once the combinational logic has settled (tready may depend on
// tvalid), and a beat transfers at the next rising edge when valid and ready were both high.
//
// Progress goes to stdout (the run's log) as "streamc-progress FRAMES CYCLES" lines: the frames that came out
// whole in the randomized phase and the cycles since reset, about twice a second (the clock is read every
// 65,536 cycles) and at the end of each phase.

#include "Vtop.h"
#include "verilated.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using Words = std::vector<uint32_t>;

std::map<std::string, std::string> read_config(const char* path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(std::string("cannot read ") + path);
    std::map<std::string, std::string> config;
    std::string key, value;
    while (in >> key >> value) config[key] = value;
    return config;
}

Words read_words(const char* path, size_t count) {
    Words words(count);
    std::ifstream in(path, std::ios::binary);
    if (!in.read(reinterpret_cast<char*>(words.data()), static_cast<std::streamsize>(count * sizeof(uint32_t))))
        throw std::runtime_error(std::string("cannot read ") + std::to_string(count) + " words from " + path);
    return words;
}

void write_words(const char* path, const Words& words) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * sizeof(uint32_t)));
    if (!out) throw std::runtime_error(std::string("cannot write ") + path);
}

// Verilator holds a port of up to 64 bits in an integer, a wider one in a VlWide of 32-bit words.
template <typename T>
typename std::enable_if<std::is_integral<T>::value>::type put(T& port, const uint32_t* words) {
    uint64_t value = words[0];
    if (sizeof(T) > 4) value |= static_cast<uint64_t>(words[1]) << 32;
    port = static_cast<T>(value);
}

template <std::size_t N>
void put(VlWide<N>& port, const uint32_t* words) {
    for (std::size_t i = 0; i < N; ++i) port[i] = words[i];
}

template <typename T>
typename std::enable_if<std::is_integral<T>::value>::type get(const T& port, Words& out) {
    const uint64_t value = port;
    out.push_back(static_cast<uint32_t>(value));
    if (sizeof(T) > 4) out.push_back(static_cast<uint32_t>(value >> 32));
}

template <std::size_t N>
void get(const VlWide<N>& port, Words& out) {
    for (std::size_t i = 0; i < N; ++i) out.push_back(port[i]);
}

// What one phase saw. A phase ends when all its input beats were taken and all its output beats came,
// or fails on its cycle budget or on a surplus output beat.
struct Phase {
    Words outputs;
    std::vector<uint64_t> input_cycles, output_cycles;
    uint64_t inputs_accepted = 0, outputs_received = 0, start = 0, cycles = 0;
    const char* failure = nullptr;  // "timeout" or "surplus"
};

class Driver {
  public:
    Driver(Vtop& top, uint64_t seed, uint64_t out_beats) : top_(top), rng_(seed), out_beats_(out_beats) {}

    // Cycles since reset.
    uint64_t cycle() const { return cycle_; }

    void reset(int cycles) {
        top_.s_axis_tvalid = 0;
        top_.m_axis_tready = 0;
        top_.rst = 1;
        for (int i = 0; i < cycles; ++i) {
            top_.eval();
            edge();
        }
        top_.rst = 0;
        cycle_ = 0;  // cycles count from the end of reset
    }

    // Sends beats [0, n_inputs) of `inputs` and takes `n_outputs` beats. Probabilities of 0 give full rate:
    // then no random number is drawn. `counted`: its whole output frames are the frames the progress counts.
    Phase run(const Words& inputs, size_t in_words, uint64_t n_inputs, uint64_t n_outputs, double gap_prob,
              double stall_prob, uint64_t budget, bool counted) {
        Phase phase;
        phase.start = cycle_;
        const bool randomized = gap_prob > 0 || stall_prob > 0;
        bool holding = false;  // a beat is offered and stays offered until taken
        while (phase.outputs_received < n_outputs || phase.inputs_accepted < n_inputs) {
            if (cycle_ - phase.start >= budget) {
                phase.failure = "timeout";
                break;
            }
            if ((cycle_ & 0xFFFF) == 0) report(false);
            if (!holding && phase.inputs_accepted < n_inputs && (!randomized || uniform() >= gap_prob)) {
                put(top_.s_axis_tdata, &inputs[phase.inputs_accepted * in_words]);
                holding = true;
            }
            const bool ready = !randomized || uniform() >= stall_prob;
            top_.s_axis_tvalid = holding;
            top_.m_axis_tready = ready;
            top_.eval();
            if (ready && top_.m_axis_tvalid) {
                if (phase.outputs_received++ == n_outputs) {
                    phase.failure = "surplus";
                    break;
                }
                get(top_.m_axis_tdata, phase.outputs);
                phase.output_cycles.push_back(cycle_);
                if (counted && phase.outputs_received % out_beats_ == 0) ++frames_done_;
            }
            if (holding && top_.s_axis_tready) {
                phase.input_cycles.push_back(cycle_);
                ++phase.inputs_accepted;
                holding = false;
            }
            edge();
        }
        top_.s_axis_tvalid = 0;
        top_.m_axis_tready = 0;
        phase.cycles = cycle_ - phase.start;
        report(true);
        return phase;
    }

  private:
    // A progress line when `now` or when half a second has passed since the last one.
    void report(bool now) {
        const auto time = std::chrono::steady_clock::now();
        if (!now && time - reported_ < std::chrono::milliseconds(500)) return;
        reported_ = time;
        std::printf("streamc-progress %llu %llu\n", static_cast<unsigned long long>(frames_done_),
                    static_cast<unsigned long long>(cycle_));
        std::fflush(stdout);
    }

    double uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

    // A rising edge, then the clock falls. The design is synchronous to the rising edge only, so the falling
    // edge is left to the next cycle's evaluation, which settles the newly driven inputs as well: two
    // evaluations a cycle, not three. Verilator sees an edge only between evaluations, so one must come
    // before every rising edge.
    void edge() {
        top_.clk = 1;
        top_.eval();
        top_.clk = 0;
        ++cycle_;
    }

    Vtop& top_;
    std::mt19937_64 rng_;
    uint64_t cycle_ = 0;
    const uint64_t out_beats_;
    uint64_t frames_done_ = 0;
    std::chrono::steady_clock::time_point reported_ = std::chrono::steady_clock::now();
};

std::string cycle_list(const std::vector<uint64_t>& cycles) {
    std::ostringstream out;
    for (size_t i = 0; i < cycles.size(); ++i) out << (i ? ", " : "") << cycles[i];
    return out.str();
}

}  // namespace

int main(int argc, char** argv) {
    auto context = std::make_unique<VerilatedContext>();
    context->commandArgs(argc, argv);
    try {
        auto config = read_config("config.txt");
        auto number = [&](const char* key) {
            auto found = config.find(key);
            if (found == config.end()) throw std::runtime_error(std::string("config.txt has no ") + key);
            return found->second;
        };
        const size_t in_words = std::stoul(number("in_words"));
        const uint64_t in_beats = std::stoull(number("in_beats_per_frame"));
        const uint64_t out_beats = std::stoull(number("out_beats_per_frame"));
        const uint64_t frames = std::stoull(number("frames")), full_rate_frames = std::stoull(number("full_rate_frames"));
        const Words inputs = read_words("frames.bin", frames * in_beats * in_words);

        auto top = std::make_unique<Vtop>(context.get());
        Driver driver(*top, std::stoull(number("seed")), out_beats);
        driver.reset(std::stoi(number("reset_cycles")));
        Phase randomized = driver.run(inputs, in_words, frames * in_beats, frames * out_beats, std::stod(number("input_gap_prob")), std::stod(number("output_stall_prob")),
                                      std::stoull(number("randomized_budget")), true);
        Phase full_rate;
        const bool rerun = randomized.failure == nullptr;
        if (rerun) {
            full_rate = driver.run(inputs, in_words, full_rate_frames * in_beats, full_rate_frames * out_beats, 0.0,
                                   0.0, std::stoull(number("full_rate_budget")), false);
        }
        const Phase& last = rerun ? full_rate : randomized;
        top->final();

        if (last.failure == nullptr) {
            write_words("outputs.bin", randomized.outputs);
            write_words("rerun_outputs.bin", full_rate.outputs);
        }
        std::vector<uint64_t> frame_ends;
        for (uint64_t k = 0; last.failure == nullptr && k < full_rate_frames; ++k)
            frame_ends.push_back(full_rate.output_cycles[(k + 1) * out_beats - 1]);
        std::ofstream result("result.json");
        result << "{\"phase\": \"" << (rerun ? "full_rate" : "randomized") << "\", \"failure\": "
               << (last.failure ? std::string("\"") + last.failure + "\"" : std::string("null"))
               << ", \"cycles\": " << driver.cycle() << ", \"inputs_accepted\": " << last.inputs_accepted
               << ", \"outputs_received\": " << last.outputs_received
               << ", \"randomized_cycles\": " << randomized.cycles << ", \"full_rate_cycles\": " << full_rate.cycles
               << ", \"frame_end_cycles\": [" << cycle_list(frame_ends) << "], \"first_input_cycle\": "
               << (full_rate.input_cycles.empty() ? 0 : full_rate.input_cycles[0]) << ", \"first_output_cycle\": "
               << (full_rate.output_cycles.empty() ? 0 : full_rate.output_cycles[0]) << "}\n";
        if (!result) throw std::runtime_error("cannot write result.json");
    } catch (const std::exception& error) {
        std::fprintf(stderr, "stream harness: %s\n", error.what());
        return 2;
    }
    return 0;
}

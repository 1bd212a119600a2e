// doctest's main, with one check added: a run whose filters select no test case fails. ctest runs
// each test file's cases out of its group's executable by --source-file (tests/CMakeLists.txt), so
// a filter that matched nothing (a renamed file, a mistyped pattern) would otherwise pass having
// tested nothing.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned selected_test_cases = 0;

// Listens for the end of the run to learn how many test cases passed the filters.
struct SelectedCases : doctest::IReporter {
    explicit SelectedCases(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats& stats) override {
        selected_test_cases = stats.numTestCasesPassingFilters;
    }
    void test_case_start(const doctest::TestCaseData&) override {}
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats&) override {}
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("selected_cases", 1, SelectedCases);

int main(int argc, char** argv) {
    doctest::Context context(argc, argv);
    const int result = context.run();
    if (context.shouldExit()) return result;  // --help, --list-test-cases and the like
    if (result == 0 && selected_test_cases == 0) {
        std::fprintf(stderr, "%s: no test case matches the filters given\n", argc > 0 ? argv[0] : "test");
        return 1;
    }
    return result;
}

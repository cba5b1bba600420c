// Writes the store fuzzer's seeds into the directory given: an empty store and one with rows
// on two machines, both written by MeasurementStore itself.
#include <cstdio>
#include <string>

#include "env/store/measurement_store.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: make_store_seeds DIR\n");
        return 1;
    }
    const std::string dir = argv[1];
    looptune::MeasurementStore::open(dir + "/empty.db");
    auto s = looptune::MeasurementStore::open(dir + "/two_rows.db");
    s->put("mm64_64_64", "m64,k64,n64|m64,n64", "cpu A|peak=118", {21.5, 10, 0.02, 1700000000});
    s->put("mm37_5_17", "m37,k17,n5|m37,n5", "cpu B|peak=226", {3.25, 12, 0.1, 1700000001});
    return 0;
}

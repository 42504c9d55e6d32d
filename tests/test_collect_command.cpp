// What the launcher reads from the command line it runs: python flags that keep
// the hook from loading, and torchrun (all ranks in one trace).
#include <catch2/catch.hpp>

#include "collect/collect.h"

using namespace stallprof::collect;

TEST_CASE("python -E, -I and -S are found as the flags that keep the hook out") {
  CHECK(PythonFlagSkippingHook({"python3", "-E", "train.py"}) == "-E");
  CHECK(PythonFlagSkippingHook({"/usr/bin/python3", "-I", "train.py"}) == "-I");
  CHECK(PythonFlagSkippingHook({"python3.11", "-uS", "train.py"}) == "-S");
  CHECK(PythonFlagSkippingHook({"python", "-W", "ignore", "-E", "-c", "pass"}) == "-E");
  CHECK(PythonFlagSkippingHook({"python3", "-Wignore", "-OO", "-IE"}) == "-I");
}

TEST_CASE("flags of the script, of -c code or of other programs are not python's") {
  CHECK_FALSE(PythonFlagSkippingHook({"python3", "train.py", "-E"}));
  CHECK_FALSE(PythonFlagSkippingHook({"python3", "-c", "print(1)", "-E"}));
  CHECK_FALSE(PythonFlagSkippingHook({"python3", "-mtorch.utils", "-I"}));
  CHECK_FALSE(PythonFlagSkippingHook({"python3", "-u", "train.py"}));
  CHECK_FALSE(PythonFlagSkippingHook({"grep", "-E", "x"}));
  CHECK_FALSE(PythonFlagSkippingHook({}));
}

TEST_CASE("torchrun and python -m torch.distributed.run are recognised, other commands are not") {
  CHECK(IsTorchrun({"torchrun", "--nproc_per_node", "2", "train.py"}));
  CHECK(IsTorchrun({"/usr/local/bin/torchrun", "train.py"}));
  CHECK(IsTorchrun({"python3", "-m", "torch.distributed.run", "train.py"}));
  CHECK(IsTorchrun({"/usr/bin/python3", "-u", "-m", "torch.distributed.launch", "train.py"}));
  CHECK_FALSE(IsTorchrun({"python3", "train.py"}));
  CHECK_FALSE(IsTorchrun({"sh", "-c", "torchrun x.py"}));
  CHECK_FALSE(IsTorchrun({}));
}

#!/usr/bin/python3
"""Copy-on-write beside a non-persistent worker, on skorch's README classifier
(Debian's python3-skorch; grown to 20000 samples, 5 epochs): without workers,
the private writable pages the process referenced during each epoch (the
accessed bits cleared through /proc/self/clear_refs at its start, which
faults nothing, and /proc/self/smaps's Referenced at its end); with workers,
the page faults the training process took each epoch (each epoch forks its
workers anew, and every page written after a fork faults once). The two
counts agreeing is what predicting the faults without workers rests on
(docs/model.md, start-up).

  /usr/bin/python3 scripts/bench_skorch_cow.py [num_workers, default 0]
"""
import resource
import sys

try:
    import numpy as np
    from sklearn.datasets import make_classification
    from skorch import NeuralNetClassifier
    from skorch.callbacks import Callback
    from torch import nn
except ImportError as e:
    sys.exit(f"bench_skorch_cow: needs python3-skorch ({e})")


def referenced_private_pages():
    kib, private = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
                private = "w" in fields[1] and "p" in fields[1]
            elif fields[0] == "Referenced:" and private:
                kib += int(fields[1])
    return kib // 4


class EpochPages(Callback):
    def __init__(self, workers):
        self.workers = workers

    def on_epoch_begin(self, net, **kwargs):
        self.faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        if self.workers == 0:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("1")

    def on_epoch_end(self, net, **kwargs):
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - self.faults
        referenced = f", referenced private pages {referenced_private_pages()}" if self.workers == 0 else ""
        print(f"epoch: page faults {faults}{referenced}", flush=True)


class MyModule(nn.Module):  # skorch's README module
    def __init__(self, num_units=10, nonlin=nn.ReLU()):
        super().__init__()
        self.dense0 = nn.Linear(20, num_units)
        self.nonlin = nonlin
        self.dropout = nn.Dropout(0.5)
        self.dense1 = nn.Linear(num_units, num_units)
        self.output = nn.Linear(num_units, 2)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, X, **kwargs):
        X = self.nonlin(self.dense0(X))
        X = self.dropout(X)
        X = self.nonlin(self.dense1(X))
        return self.softmax(self.output(X))


def main():
    workers = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    X, y = make_classification(20000, 20, n_informative=10, random_state=0)
    net = NeuralNetClassifier(MyModule, max_epochs=5, lr=0.1, iterator_train__shuffle=True, verbose=0,
                              iterator_train__num_workers=workers, iterator_valid__num_workers=workers,
                              callbacks=[EpochPages(workers)])
    net.fit(X.astype(np.float32), y.astype(np.int64))


if __name__ == "__main__":
    main()

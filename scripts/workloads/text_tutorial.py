"""The PyTorch tutorial "Text classification with the torchtext library"
(beginner_source/text_sentiment_ngrams_tutorial.py), for checking stallprof
on code not written for it: its collate_batch (tokenizing in the loader),
EmbeddingBag model and train loop, unchanged but for two swaps and this
command line. AG_NEWS (a download) becomes generated news-like lines in its
(label, text) form, 40000 for training, and torchtext (Debian's 0.14.1 does
not import with Debian's Python 3.11) becomes its basic_english tokenizer
and a dict vocabulary, copied from torchtext 0.14 (BSD-3-Clause, as the
tutorial). The tutorial runs with num_workers=0; --workers sets the training
loader's. Needs only python3-torch.

  text_tutorial.py [--workers W] [--epochs E]

Prints each epoch's training samples/s, as the tutorial's log_interval lines
would.
"""
import argparse
import itertools
import random
import re
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torch.utils.data.dataset import random_split

# torchtext/data/utils.py: _basic_english_normalize
_patterns = [r"\'", r"\"", r"\.", r"<br \/>", r",", r"\(", r"\)", r"\!", r"\?", r"\;", r"\:", r"\s+"]
_replacements = [" '  ", "", " . ", " ", " , ", " ( ", " ) ", " ! ", " ? ", " ", " ", " "]
_patterns_dict = list((re.compile(p), r) for p, r in zip(_patterns, _replacements))


def tokenizer(line):
    line = line.lower()
    for pattern_re, replaced_str in _patterns_dict:
        line = pattern_re.sub(replaced_str, line)
    return line.split()


def make_split(n, seed):
    """n (label, text) pairs shaped like AG_NEWS: a title, a body of 25-45
    words drawn from 20000 by Zipf's law, a quote."""
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(20000)]
    cum_weights = list(itertools.accumulate(1 / (i + 1) for i in range(len(words))))  # once, not per line
    out = []
    for _ in range(n):
        label = rng.randint(1, 4)
        body = rng.choices(words, cum_weights=cum_weights, k=rng.randint(25, 45))
        out.append((label, " ".join(body[:8]).title() + " (AP) - " + ", ".join(body[8:]) + '. "Quote," said ' + body[0] + "."))
    return out


parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--workers", type=int, default=0)
parser.add_argument("--epochs", type=int, default=3)
args = parser.parse_args()

train_iter = make_split(40000, 1)
test_iter = make_split(4000, 2)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def yield_tokens(data_iter):
    for _, text in data_iter:
        yield tokenizer(text)


vocab = {"<unk>": 0}
for tokens in yield_tokens(train_iter):
    for t in tokens:
        vocab.setdefault(t, len(vocab))
text_pipeline = lambda x: [vocab.get(t, 0) for t in tokenizer(x)]
label_pipeline = lambda x: int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for (_label, _text) in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        embedded = self.embedding(text, offsets)
        return self.fc(embedded)


num_class = len(set([label for (label, text) in train_iter]))
vocab_size = len(vocab)
emsize = 64
model = TextClassificationModel(vocab_size, emsize, num_class).to(device)


def train(dataloader):
    model.train()
    total_acc, total_count = 0, 0
    start_time = time.time()
    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
    return total_count / (time.time() - start_time)


def evaluate(dataloader):
    model.eval()
    total_acc, total_count = 0, 0
    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            loss = criterion(predicted_label, label)
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count


LR = 5  # learning rate
BATCH_SIZE = 64  # batch size for training
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset = train_iter  # to_map_style_dataset of a list is the list
test_dataset = test_iter
num_train = int(len(train_dataset) * 0.95)
split_train_, split_valid_ = random_split(train_dataset, [num_train, len(train_dataset) - num_train])
train_dataloader = DataLoader(split_train_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch,
                              num_workers=args.workers)
valid_dataloader = DataLoader(split_valid_, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
test_dataloader = DataLoader(test_dataset, batch_size=BATCH_SIZE, shuffle=True, collate_fn=collate_batch)
for epoch in range(1, args.epochs + 1):
    epoch_start_time = time.time()
    rate = train(train_dataloader)
    accu_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print("| end of epoch {:3d} | time: {:5.2f}s | valid accuracy {:8.3f} | train {:.0f} samples/s".format(
        epoch, time.time() - epoch_start_time, accu_val, rate))

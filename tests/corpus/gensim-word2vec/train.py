# Gensim, word2vec's usage example (https://radimrehurek.com/gensim/models/word2vec.html): a Word2Vec
# model trained on gensim's bundled common_texts with four worker threads, saved with model.save.
from gensim.test.utils import common_texts
from gensim.models import Word2Vec

model = Word2Vec(sentences=common_texts, vector_size=100, window=5, min_count=1, workers=4)
model.save("word2vec.model")

// Hand-written twin of `empty` in twins.cu: the dispatch round trip.
#version 450
layout(local_size_x = 32) in;
void main() {}

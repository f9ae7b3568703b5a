// The test turns hang.h into a FIFO with no writer: the compiler blocks opening it forever.
#include "hang.h"

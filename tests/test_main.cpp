#define BOOST_TEST_MODULE arclight
#include <boost/test/unit_test.hpp>
